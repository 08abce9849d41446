/*  =========================================================================
    upstream - gridrelay's list of upstreams (see upstream.h)
    =========================================================================
*/
#include "upstream.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct {
    char *endpoint;                  //  Agent endpoint
    char *publish;                   //  Commands endpoint
    char key [KEYS_TEXT_SIZE];       //  Broker key trusted there ("" none)
} s_entry_t;

struct _relay_upstream_t {
    s_entry_t entries [RELAY_UPSTREAM_MAX];
    size_t count;
    size_t index;                    //  In use
    unsigned redirects;              //  Followed since redirect_since_ms
    int64_t redirect_since_ms;       //  Monotonic
    char old_key [KEYS_TEXT_SIZE];   //  A rotation: the key replaced...
    char new_key [KEYS_TEXT_SIZE];   //  ...by this one ("": none)
};

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  Splits TEXT at commas into ITEMS (at most MAX, trimmed of blanks,
//  copies). Returns how many, or -1 for an empty item or too many.
static int
s_split (const char *text, char **items, size_t max)
{
    size_t count = 0;
    const char *at = text ? text : "";
    while (true) {
        const char *comma = strchr (at, ',');
        size_t len = comma ? (size_t) (comma - at) : strlen (at);
        while (len && (*at == ' ' || *at == '\t')) {
            at++;
            len--;
        }
        while (len && (at [len - 1] == ' ' || at [len - 1] == '\t'))
            len--;
        if (len == 0 || count == max) {
            for (size_t index = 0; index < count; index++)
                free (items [index]);
            return -1;
        }
        items [count] = (char *) malloc (len + 1);
        memcpy (items [count], at, len);
        items [count++] [len] = 0;
        if (!comma)
            break;
        at = comma + 1;
    }
    return (int) count;
}

static void
s_free (char **items, int count)
{
    for (int index = 0; index < count; index++)
        free (items [index]);
}

//  Reads the lists; KEYS_OUT (may be NULL) gets each endpoint's key.
static int
s_read (const char *endpoints, const char *publishes, const char *keys,
        s_entry_t *entries, size_t *count_p, bool read_keys, char *err,
        size_t err_len)
{
    char *ends [RELAY_UPSTREAM_MAX], *pubs [RELAY_UPSTREAM_MAX];
    char *texts [RELAY_UPSTREAM_MAX];
    int end_count = s_split (endpoints, ends, RELAY_UPSTREAM_MAX);
    int pub_count = s_split (publishes, pubs, RELAY_UPSTREAM_MAX);
    int key_count = keys ? s_split (keys, texts, RELAY_UPSTREAM_MAX) : 0;
    int rc = 0;
    if (end_count < 0 || pub_count < 0 || key_count < 0) {
        s_err (err, err_len, "upstream, upstream_publish and upstream_key: "
               "comma-separated lists of 1 to %d items, none empty",
               RELAY_UPSTREAM_MAX);
        rc = -1;
    }
    else
    if (pub_count != end_count) {
        s_err (err, err_len, "upstream_publish: one commands endpoint per "
               "upstream endpoint (%d given for %d)", pub_count, end_count);
        rc = -1;
    }
    else
    if (keys && key_count != 1 && key_count != end_count) {
        s_err (err, err_len, "upstream_key: one key for every upstream "
               "endpoint, or one per endpoint (%d given for %d)", key_count,
               end_count);
        rc = -1;
    }
    for (int index = 0; rc == 0 && read_keys && keys && index < end_count;
         index++) {
        char why [512];
        const char *text = texts [key_count == 1 ? 0 : index];
        if (keys_read_public (text, entries [index].key, why, sizeof why)
            != 0) {
            s_err (err, err_len, "upstream key: %s", why);
            rc = -1;
        }
    }
    if (rc == 0 && entries) {
        for (int index = 0; index < end_count; index++) {
            entries [index].endpoint = ends [index];
            entries [index].publish = pubs [index];
        }
        *count_p = (size_t) end_count;
    }
    else {
        if (end_count > 0)
            s_free (ends, end_count);
        if (pub_count > 0)
            s_free (pubs, pub_count);
    }
    if (key_count > 0)
        s_free (texts, key_count);
    return rc;
}

int
relay_upstream_check (const char *endpoints, const char *publishes,
                      const char *keys, char *err, size_t err_len)
{
    return s_read (endpoints, publishes, keys, NULL, NULL, false, err,
                   err_len);
}

relay_upstream_t *
relay_upstream_new (const char *endpoints, const char *publishes,
                    const char *keys, char *err, size_t err_len)
{
    relay_upstream_t *self = (relay_upstream_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    if (s_read (endpoints, publishes, keys, self->entries, &self->count,
                true, err, err_len) != 0) {
        free (self);
        return NULL;
    }
    return self;
}

void
relay_upstream_destroy (relay_upstream_t **self_p)
{
    relay_upstream_t *self = *self_p;
    if (!self)
        return;
    for (size_t index = 0; index < self->count; index++) {
        free (self->entries [index].endpoint);
        free (self->entries [index].publish);
    }
    free (self);
    *self_p = NULL;
}

size_t
relay_upstream_count (const relay_upstream_t *self)
{
    return self->count;
}

size_t
relay_upstream_index (const relay_upstream_t *self)
{
    return self->index;
}

const char *
relay_upstream_endpoint (const relay_upstream_t *self, size_t index)
{
    return index < self->count ? self->entries [index].endpoint : NULL;
}

const char *
relay_upstream_publish (const relay_upstream_t *self, size_t index)
{
    return index < self->count ? self->entries [index].publish : NULL;
}

const char *
relay_upstream_key (const relay_upstream_t *self, size_t index)
{
    return index < self->count ? self->entries [index].key : NULL;
}

void
relay_upstream_use (relay_upstream_t *self, size_t index)
{
    if (index < self->count)
        self->index = index;
}

size_t
relay_upstream_next (const relay_upstream_t *self)
{
    return (self->index + 1) % self->count;
}

int
relay_upstream_redirect (relay_upstream_t *self, const char *endpoint,
                         int64_t now_ms, size_t *index_p, const char **why_p)
{
    size_t index = 0;
    while (endpoint && index < self->count
           && strcmp (self->entries [index].endpoint, endpoint) != 0)
        index++;
    if (now_ms - self->redirect_since_ms > RELAY_UPSTREAM_REDIRECT_WINDOW_MS) {
        self->redirects = 0;
        self->redirect_since_ms = now_ms;
    }
    *why_p = !endpoint ? "names no active"
           : index == self->count ? "is not one of this relay's upstream "
                                    "endpoints: not followed"
           : index == self->index ? "is the one in use"
           : self->redirects >= RELAY_UPSTREAM_REDIRECTS_MAX
               ? "was one redirect too many this minute: not followed"
           : NULL;
    if (*why_p)
        return -1;
    self->redirects++;
    *index_p = index;
    return 0;
}

void
relay_upstream_welcomed (relay_upstream_t *self)
{
    self->redirects = 0;
}

int
relay_upstream_next_key (relay_upstream_t *self, const char *next)
{
    const char *trusted = self->entries [self->index].key;
    if (!next || strlen (next) != KEYS_Z85_LEN || !*trusted)
        return -1;
    uint8_t bytes [32];
    if (!zmq_z85_decode (bytes, next))
        return -1;
    if (strcmp (next, self->new_key) == 0)
        return 0;
    //  Announced on a session made with the next key: the rotation of an
    //  old key that was swapped in, already
    if (strcmp (next, trusted) == 0)
        return strcmp (trusted, self->new_key) == 0 ? 0 : -1;
    snprintf (self->old_key, sizeof self->old_key, "%s", trusted);
    snprintf (self->new_key, sizeof self->new_key, "%s", next);
    return 1;
}

const char *
relay_upstream_next_key_of (const relay_upstream_t *self)
{
    return *self->new_key ? self->new_key : NULL;
}

const char *
relay_upstream_old_key_of (const relay_upstream_t *self)
{
    return *self->new_key ? self->old_key : NULL;
}

//  True when TEXT is a public key in its Z85 text.
static bool
s_z85_key (const char *text)
{
    uint8_t bytes [32];
    return text && strlen (text) == KEYS_Z85_LEN
           && zmq_z85_decode (bytes, text) != NULL;
}

//  True when an endpoint of the list trusts KEY.
static bool
s_trusted_anywhere (const relay_upstream_t *self, const char *key)
{
    for (size_t index = 0; index < self->count; index++)
        if (strcmp (self->entries [index].key, key) == 0)
            return true;
    return false;
}

int
relay_upstream_resume (relay_upstream_t *self, const char *old,
                       const char *next)
{
    if (!s_z85_key (old) || !s_z85_key (next) || strcmp (old, next) == 0
        || (!s_trusted_anywhere (self, old)
            && !s_trusted_anywhere (self, next)))
        return -1;
    snprintf (self->old_key, sizeof self->old_key, "%s", old);
    snprintf (self->new_key, sizeof self->new_key, "%s", next);
    return 0;
}

size_t
relay_upstream_map (relay_upstream_t *self, const char *old,
                    const char *next)
{
    size_t mapped = 0;
    if (!s_z85_key (old) || !s_z85_key (next))
        return 0;
    for (size_t index = 0; index < self->count; index++)
        if (strcmp (self->entries [index].key, old) == 0) {
            snprintf (self->entries [index].key, KEYS_TEXT_SIZE, "%s", next);
            mapped++;
        }
    return mapped;
}

bool
relay_upstream_swap (relay_upstream_t *self)
{
    char *trusted = self->entries [self->index].key;
    if (!*self->new_key)
        return false;
    if (strcmp (trusted, self->old_key) == 0)
        snprintf (trusted, KEYS_TEXT_SIZE, "%s", self->new_key);
    else
    if (strcmp (trusted, self->new_key) == 0)
        snprintf (trusted, KEYS_TEXT_SIZE, "%s", self->old_key);
    else
        return false;
    return true;
}

bool
relay_upstream_settle (relay_upstream_t *self)
{
    if (!*self->new_key
        || strcmp (self->entries [self->index].key, self->new_key) != 0)
        return false;
    for (size_t index = 0; index < self->count; index++)
        if (strcmp (self->entries [index].key, self->old_key) == 0)
            snprintf (self->entries [index].key, KEYS_TEXT_SIZE, "%s",
                      self->new_key);
    *self->old_key = 0;
    *self->new_key = 0;
    return true;
}
