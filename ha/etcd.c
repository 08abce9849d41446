/*  =========================================================================
    etcd - a small client of etcd's v3 JSON gateway (see etcd.h)
    =========================================================================
*/

#include "etcd.h"

#include <assert.h>
#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_ENDPOINTS 16
#define S_MAX_ANSWER (1024 * 1024)    //  Longest answer read

struct _etcd_t {
    char *endpoints [S_MAX_ENDPOINTS];   //  Base URLs, no trailing slash
    size_t endpoint_count;
    size_t current;                      //  Tried first
    int64_t timeout_ms;
    CURL *curl;                          //  One handle: keeps connections
    char error [512];
    char *answer;                        //  The last answer's body
    size_t answer_size;
    long refused;                        //  The last call's 4xx, or 0
    bool answer_too_long;
};

static void
s_fail (etcd_t *self, const char *format, ...)
    __attribute__ ((format (printf, 2, 3)));

static void
s_fail (etcd_t *self, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (self->error, sizeof self->error, format, args);
    va_end (args);
}

//  True when TEXT (LEN bytes) is http:// or https:// and a host.
static bool
s_url_valid (const char *text, size_t len)
{
    size_t scheme = len >= 7 && strncmp (text, "http://", 7) == 0 ? 7
                  : len >= 8 && strncmp (text, "https://", 8) == 0 ? 8 : 0;
    if (!scheme || len == scheme || len > 400)
        return false;
    for (size_t index = scheme; index < len; index++)
        if (text [index] <= ' ' || text [index] == '?' || text [index] == '#'
            || text [index] > '~')
            return false;
    return true;
}

etcd_t *
etcd_new (const char *endpoints, int64_t timeout_ms, char *err,
          size_t err_len)
{
    static bool curl_ready = false;
    if (!curl_ready) {
        //  Not thread-safe itself: the first client is made before any
        //  thread that uses one starts (ha/elector.c)
        curl_global_init (CURL_GLOBAL_DEFAULT);
        curl_ready = true;
    }
    etcd_t *self = (etcd_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_len, "out of memory");
        return NULL;
    }
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    const char *at = endpoints ? endpoints : "";
    while (*at) {
        const char *end = strchr (at, ',');
        size_t len = end ? (size_t) (end - at) : strlen (at);
        while (len && at [len - 1] == '/')
            len--;
        if (len) {
            if (!s_url_valid (at, len)
                || self->endpoint_count == S_MAX_ENDPOINTS) {
                snprintf (err, err_len, "etcd endpoint '%.*s': expected "
                          "http://HOST:PORT or https://HOST:PORT (at most "
                          "%d)", (int) (len > 100 ? 100 : len), at,
                          S_MAX_ENDPOINTS);
                etcd_destroy (&self);
                return NULL;
            }
            self->endpoints [self->endpoint_count++] = strndup (at, len);
        }
        at += len;
        while (*at == ',' || *at == '/')
            at++;
    }
    if (self->endpoint_count == 0) {
        snprintf (err, err_len, "no etcd endpoint given");
        etcd_destroy (&self);
        return NULL;
    }
    self->curl = curl_easy_init ();
    if (!self->curl) {
        snprintf (err, err_len, "cannot start libcurl");
        etcd_destroy (&self);
        return NULL;
    }
    return self;
}

void
etcd_destroy (etcd_t **self_p)
{
    assert (self_p);
    etcd_t *self = *self_p;
    if (!self)
        return;
    for (size_t index = 0; index < self->endpoint_count; index++)
        free (self->endpoints [index]);
    if (self->curl)
        curl_easy_cleanup (self->curl);
    free (self->answer);
    free (self);
    *self_p = NULL;
}

const char *
etcd_error (etcd_t *self)
{
    return self->error;
}

const char *
etcd_endpoint (etcd_t *self)
{
    return self->endpoints [self->current];
}

void
etcd_endpoint_skip (etcd_t *self)
{
    self->current = (self->current + 1) % self->endpoint_count;
}

static size_t
s_on_data (char *data, size_t size, size_t count, void *arg)
{
    etcd_t *self = (etcd_t *) arg;
    size_t len = size * count;
    if (self->answer_size + len > S_MAX_ANSWER) {
        self->answer_too_long = true;
        return 0;
    }
    char *grown = (char *) realloc (self->answer, self->answer_size + len + 1);
    if (!grown)
        return 0;
    self->answer = grown;
    memcpy (self->answer + self->answer_size, data, len);
    self->answer_size += len;
    self->answer [self->answer_size] = 0;
    return len;
}

//  POSTs BODY to ROUTE on each endpoint in turn from the current one,
//  until one answers 200 with JSON. Returns the answer (caller decrefs)
//  or NULL (self->error set).
static json_t *
s_call (etcd_t *self, const char *route, json_t *body)
{
    char *text = json_dumps (body, JSON_COMPACT);
    json_decref (body);
    if (!text) {
        s_fail (self, "out of memory");
        return NULL;
    }
    json_t *answer = NULL;
    self->refused = 0;
    for (size_t tried = 0;
         tried < self->endpoint_count && !answer && !self->refused;
         tried++) {
        size_t which = (self->current + tried) % self->endpoint_count;
        char url [512];
        snprintf (url, sizeof url, "%s%s", self->endpoints [which], route);
        free (self->answer);
        self->answer = NULL;
        self->answer_size = 0;
        self->answer_too_long = false;
        CURL *curl = self->curl;
        curl_easy_reset (curl);
        struct curl_slist *headers = curl_slist_append (
            NULL, "Content-Type: application/json");
        curl_easy_setopt (curl, CURLOPT_URL, url);
        curl_easy_setopt (curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt (curl, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt (curl, CURLOPT_TIMEOUT_MS, (long) self->timeout_ms);
        curl_easy_setopt (curl, CURLOPT_CONNECTTIMEOUT_MS,
                          (long) self->timeout_ms);
        curl_easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt (curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt (curl, CURLOPT_WRITEFUNCTION, s_on_data);
        curl_easy_setopt (curl, CURLOPT_WRITEDATA, self);
        CURLcode rc = curl_easy_perform (curl);
        curl_slist_free_all (headers);
        long status = 0;
        curl_easy_getinfo (curl, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK) {
            s_fail (self, "etcd %s: %s", self->endpoints [which],
                    self->answer_too_long ? "answer too long"
                                          : curl_easy_strerror (rc));
            continue;
        }
        json_error_t error;
        json_t *parsed = self->answer
                         ? json_loadb (self->answer, self->answer_size,
                                       JSON_DISABLE_EOF_CHECK, &error)
                         : NULL;
        if (status != 200 || !json_is_object (parsed)) {
            json_t *message = json_object_get (parsed, "error");
            s_fail (self, "etcd %s: HTTP %ld%s%s", self->endpoints [which],
                    status, json_is_string (message) ? ": " : "",
                    json_is_string (message) ? json_string_value (message)
                                             : "");
            json_decref (parsed);
            //  etcd said no (a lease not found...): an answer, not an
            //  endpoint that failed
            if (status >= 400 && status < 500) {
                self->current = which;
                self->refused = status;
            }
            continue;
        }
        self->current = which;
        self->error [0] = 0;
        answer = parsed;
    }
    free (text);
    return answer;
}

//  A 64-bit number the gateway sends as a string (or leaves out: 0).
//  Returns 0, or -1 when it is something else.
static int
s_int64 (json_t *value, int64_t *number)
{
    *number = 0;
    if (!value)
        return 0;
    if (json_is_integer (value)) {
        *number = json_integer_value (value);
        return 0;
    }
    if (!json_is_string (value))
        return -1;
    const char *text = json_string_value (value);
    char *end = NULL;
    long long parsed = strtoll (text, &end, 10);
    if (end == text || *end)
        return -1;
    *number = parsed;
    return 0;
}

//  SIZE bytes at DATA in base64, as a new JSON string (NULL: no memory).
static json_t *
s_base64 (const void *data, size_t size)
{
    gnutls_datum_t in = { (unsigned char *) data, (unsigned int) size };
    gnutls_datum_t out = { NULL, 0 };
    if (size == 0)
        return json_string ("");
    if (gnutls_base64_encode2 (&in, &out) != 0)
        return NULL;
    json_t *text = json_stringn ((const char *) out.data, out.size);
    gnutls_free (out.data);
    return text;
}

//  The base64 string VALUE decoded into KV's value. Returns 0 or -1.
static int
s_unbase64 (json_t *value, etcd_kv_t *kv)
{
    const char *text = json_string_value (value);
    size_t len = json_string_length (value);
    if (!text || len == 0) {
        kv->value = strdup ("");
        kv->size = 0;
        return kv->value ? 0 : -1;
    }
    gnutls_datum_t in = { (unsigned char *) text, (unsigned int) len };
    gnutls_datum_t out = { NULL, 0 };
    if (gnutls_base64_decode2 (&in, &out) != 0 || out.size > ETCD_MAX_VALUE)
        return -1;
    kv->value = (char *) malloc (out.size + 1);
    if (!kv->value) {
        gnutls_free (out.data);
        return -1;
    }
    memcpy (kv->value, out.data, out.size);
    kv->value [out.size] = 0;
    kv->size = out.size;
    gnutls_free (out.data);
    return 0;
}

//  The first key-value of a range answer RANGE into KV. Returns 1 when
//  there is one, 0 when not, ETCD_EPROTO.
static int
s_first_kv (etcd_t *self, json_t *range, etcd_kv_t *kv)
{
    memset (kv, 0, sizeof *kv);
    json_t *kvs = json_object_get (range, "kvs");
    if (!kvs || json_array_size (kvs) == 0)
        return 0;
    json_t *first = json_array_get (kvs, 0);
    if (!json_is_object (first)
        || s_int64 (json_object_get (first, "create_revision"),
                    &kv->create_revision)
        || s_int64 (json_object_get (first, "mod_revision"),
                    &kv->mod_revision)
        || s_int64 (json_object_get (first, "lease"), &kv->lease)
        || s_unbase64 (json_object_get (first, "value"), kv)) {
        etcd_kv_clear (kv);
        s_fail (self, "etcd %s: a key-value that is not the gateway's",
                etcd_endpoint (self));
        return ETCD_EPROTO;
    }
    return 1;
}

static int
s_proto (etcd_t *self, json_t *answer, const char *what)
{
    json_decref (answer);
    s_fail (self, "etcd %s: %s", etcd_endpoint (self), what);
    return ETCD_EPROTO;
}

int
etcd_lease_grant (etcd_t *self, int64_t ttl_s, int64_t *id_p)
{
    *id_p = 0;
    json_t *answer = s_call (self, "/v3/lease/grant",
                             json_pack ("{s:I}", "TTL", (json_int_t) ttl_s));
    if (!answer)
        return self->refused ? ETCD_EPROTO : ETCD_EIO;
    int64_t id = 0;
    if (s_int64 (json_object_get (answer, "ID"), &id) || id == 0)
        return s_proto (self, answer, "no lease in the grant's answer");
    json_decref (answer);
    *id_p = id;
    return 0;
}

int
etcd_lease_keepalive (etcd_t *self, int64_t id, int64_t *ttl_p)
{
    *ttl_p = 0;
    char text [32];
    snprintf (text, sizeof text, "%" PRId64, id);
    json_t *answer = s_call (self, "/v3/lease/keepalive",
                             json_pack ("{s:s}", "ID", text));
    if (!answer)
        return self->refused == 404 ? 0 : self->refused ? ETCD_EPROTO
                                                        : ETCD_EIO;
    json_t *result = json_object_get (answer, "result");
    int64_t ttl = 0;
    if (!json_is_object (result)
        || s_int64 (json_object_get (result, "TTL"), &ttl))
        return s_proto (self, answer, "no result in the keepalive's answer");
    json_decref (answer);
    *ttl_p = ttl;
    return ttl > 0 ? 1 : 0;
}

int
etcd_lease_ttl (etcd_t *self, int64_t id, int64_t *ttl_p)
{
    *ttl_p = 0;
    char text [32];
    snprintf (text, sizeof text, "%" PRId64, id);
    json_t *answer = s_call (self, "/v3/lease/timetolive",
                             json_pack ("{s:s}", "ID", text));
    if (!answer)
        return self->refused == 404 ? 0 : self->refused ? ETCD_EPROTO
                                                        : ETCD_EIO;
    //  The gateway leaves out a TTL of 0; -1 says the lease is gone
    int64_t ttl = 0;
    if (s_int64 (json_object_get (answer, "TTL"), &ttl))
        return s_proto (self, answer, "no TTL in the timetolive's answer");
    json_decref (answer);
    *ttl_p = ttl > 0 ? ttl : 0;
    return ttl >= 0 ? 1 : 0;
}

int
etcd_lease_revoke (etcd_t *self, int64_t id)
{
    char text [32];
    snprintf (text, sizeof text, "%" PRId64, id);
    json_t *answer = s_call (self, "/v3/lease/revoke",
                             json_pack ("{s:s}", "ID", text));
    if (answer) {
        json_decref (answer);
        return 0;
    }
    //  A lease that is gone already is answered 404 by the gateway
    return self->refused == 404 ? 0 : self->refused ? ETCD_EPROTO : ETCD_EIO;
}

//  A compare of a txn: TARGET of KEY (CREATE or MOD) equal to REVISION.
static json_t *
s_compare (const char *key, const char *target, int64_t revision)
{
    char text [32];
    snprintf (text, sizeof text, "%" PRId64, revision);
    return json_pack ("{s:o,s:s,s:s,s:s}",
        "key", s_base64 (key, strlen (key)), "target", target,
        strcmp (target, "CREATE") == 0 ? "create_revision" : "mod_revision",
        text, "result", "EQUAL");
}

//  A txn: every compare of COMPARES (taken) holds, then SUCCESS (taken),
//  else range KEY. Returns the answer or NULL.
static json_t *
s_txn_all (etcd_t *self, const char *key, json_t *compares, json_t *success)
{
    json_t *body = json_pack ("{s:o,s:[o],s:[{s:{s:o}}]}",
        "compare", compares, "success", success,
        "failure", "request_range", "key", s_base64 (key, strlen (key)));
    if (!body) {
        s_fail (self, "out of memory");
        return NULL;
    }
    return s_call (self, "/v3/kv/txn", body);
}

//  A txn of one compare: TARGET of KEY with REVISION.
static json_t *
s_txn (etcd_t *self, const char *key, const char *target, int64_t revision,
       json_t *success)
{
    return s_txn_all (self, key,
                      json_pack ("[o]", s_compare (key, target, revision)),
                      success);
}

//  A put of KEY, VALUE (SIZE bytes) under LEASE, as a txn's operation.
static json_t *
s_put_op (const char *key, const void *value, size_t size, int64_t lease)
{
    json_t *put = json_pack ("{s:o,s:o}", "key", s_base64 (key, strlen (key)),
                             "value", s_base64 (value, size));
    if (put && lease) {
        char text [32];
        snprintf (text, sizeof text, "%" PRId64, lease);
        json_object_set_new (put, "lease", json_string (text));
    }
    return json_pack ("{s:o}", "request_put", put);
}

//  The txn ANSWER's outcome: 1 succeeded (*REVISION_P its header's
//  revision), 0 failed (HOLDER, when given, what the range found).
static int
s_txn_outcome (etcd_t *self, json_t *answer, int64_t *revision_p,
               etcd_kv_t *holder)
{
    if (revision_p)
        *revision_p = 0;
    json_t *succeeded = json_object_get (answer, "succeeded");
    if (json_is_true (succeeded)) {
        int64_t revision = 0;
        if (s_int64 (json_object_get (json_object_get (answer, "header"),
                                      "revision"), &revision) || !revision)
            return s_proto (self, answer, "no revision in the txn's answer");
        if (revision_p)
            *revision_p = revision;
        json_decref (answer);
        return 1;
    }
    int rc = 0;
    if (holder) {
        json_t *range = json_object_get (json_array_get (
            json_object_get (answer, "responses"), 0), "response_range");
        rc = s_first_kv (self, range, holder);
        if (rc > 0)
            rc = 0;
    }
    json_decref (answer);
    return rc;
}

int
etcd_create (etcd_t *self, const char *key, const void *value, size_t size,
             int64_t lease, int64_t *revision_p, etcd_kv_t *holder)
{
    return etcd_create_guarded (self, key, value, size, lease, NULL, 0,
                                revision_p, holder);
}

int
etcd_create_guarded (etcd_t *self, const char *key, const void *value,
                     size_t size, int64_t lease, const char *guard,
                     int64_t guard_revision, int64_t *revision_p,
                     etcd_kv_t *holder)
{
    if (holder)
        memset (holder, 0, sizeof *holder);
    if (size > ETCD_MAX_VALUE) {
        s_fail (self, "a value of %zu bytes is longer than %d", size,
                ETCD_MAX_VALUE);
        return ETCD_EPROTO;
    }
    json_t *compares = json_pack ("[o]", s_compare (key, "CREATE", 0));
    if (guard)
        json_array_append_new (compares, s_compare (
            guard, guard_revision ? "MOD" : "CREATE", guard_revision));
    json_t *answer = s_txn_all (self, key, compares,
                                s_put_op (key, value, size, lease));
    if (!answer)
        return self->refused ? ETCD_EPROTO : ETCD_EIO;
    return s_txn_outcome (self, answer, revision_p, holder);
}

int
etcd_replace (etcd_t *self, const char *key, const void *value, size_t size,
              int64_t mod_revision, int64_t *revision_p)
{
    return etcd_replace_fenced (self, key, value, size, mod_revision, NULL, 0,
                                revision_p);
}

int
etcd_replace_fenced (etcd_t *self, const char *key, const void *value,
                     size_t size, int64_t mod_revision, const char *fence,
                     int64_t fence_revision, int64_t *revision_p)
{
    if (size > ETCD_MAX_VALUE) {
        s_fail (self, "a value of %zu bytes is longer than %d", size,
                ETCD_MAX_VALUE);
        return ETCD_EPROTO;
    }
    //  Mod revision 0 compares as "never written"; CREATE 0 says the same
    json_t *compares = json_pack ("[o]", s_compare (
        key, mod_revision ? "MOD" : "CREATE", mod_revision));
    if (fence)
        json_array_append_new (compares, s_compare (fence, "CREATE",
                                                    fence_revision));
    json_t *answer = s_txn_all (self, key, compares,
                                s_put_op (key, value, size, 0));
    if (!answer)
        return self->refused ? ETCD_EPROTO : ETCD_EIO;
    return s_txn_outcome (self, answer, revision_p, NULL);
}

int
etcd_delete_own (etcd_t *self, const char *key, int64_t create_revision)
{
    json_t *delete = json_pack ("{s:{s:o}}", "request_delete_range", "key",
                                s_base64 (key, strlen (key)));
    json_t *answer = s_txn (self, key, "CREATE", create_revision, delete);
    if (!answer)
        return self->refused ? ETCD_EPROTO : ETCD_EIO;
    return s_txn_outcome (self, answer, NULL, NULL);
}

int
etcd_get (etcd_t *self, const char *key, etcd_kv_t *kv)
{
    memset (kv, 0, sizeof *kv);
    json_t *answer = s_call (self, "/v3/kv/range",
                             json_pack ("{s:o}", "key",
                                        s_base64 (key, strlen (key))));
    if (!answer)
        return self->refused ? ETCD_EPROTO : ETCD_EIO;
    int rc = s_first_kv (self, answer, kv);
    json_decref (answer);
    return rc;
}

void
etcd_kv_clear (etcd_kv_t *kv)
{
    if (!kv)
        return;
    free (kv->value);
    memset (kv, 0, sizeof *kv);
}
