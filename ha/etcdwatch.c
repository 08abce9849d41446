/*  =========================================================================
    etcdwatch - a watch of one etcd key, streamed on its own thread
    (see etcdwatch.h)
    =========================================================================
*/

#include "etcdwatch.h"

#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

#define S_CONNECT_MS 2000        //  A connect that takes longer failed
#define S_KEEPIDLE_S 5           //  TCP keepalive: first probe after
#define S_KEEPINTVL_S 2          //  ...then one every

typedef struct {
    zsock_t *pipe;
    etcd_t *etcd;                //  Holds the endpoints (no call is made)
    char *key;
    CURLM *multi;
    CURL *curl;                  //  The stream, NULL while it is down
    struct curl_slist *headers;
    char *body;                  //  The stream's request
    char *buffer;                //  Bytes of the stream not parsed yet
    size_t size;
    bool too_long;               //  An object longer than the limit
    int64_t next_revision;       //  Open from this revision (0: now)
    int64_t retry_ms;            //  While down: open again then
    bool up;                     //  WATCHING said, BROKEN not since
    bool broken_said;            //  BROKEN said, WATCHING not since
    char broken [512];           //  Why the stream is being closed ("")
    bool terminated;
} s_watch_t;

size_t
etcdwatch_object_end (const char *data, size_t size)
{
    size_t at = 0;
    while (at < size && (data [at] == ' ' || data [at] == '\n'
                         || data [at] == '\r' || data [at] == '\t'))
        at++;
    if (at == size)
        return 0;
    //  Not an object: one byte, which no parser takes
    if (data [at] != '{')
        return at + 1;
    int depth = 0;
    bool quoted = false, escaped = false;
    for (; at < size; at++) {
        char c = data [at];
        if (quoted) {
            if (escaped)
                escaped = false;
            else
            if (c == '\\')
                escaped = true;
            else
            if (c == '"')
                quoted = false;
        }
        else
        if (c == '"')
            quoted = true;
        else
        if (c == '{' || c == '[')
            depth++;
        else
        if ((c == '}' || c == ']') && --depth == 0)
            return at + 1;
    }
    return 0;
}

static void
s_say (s_watch_t *self, const char *what, int64_t number, const char *text,
       const char *more)
{
    char digits [32];
    snprintf (digits, sizeof digits, "%" PRId64, number);
    zstr_sendx (self->pipe, what, digits, text, more, NULL);
}

//  Marks the stream broken for WHY (the first reason wins).
static void
s_break (s_watch_t *self, const char *why)
{
    if (!*self->broken)
        snprintf (self->broken, sizeof self->broken, "etcd %s: %s",
                  etcd_endpoint (self->etcd), why);
}

static size_t
s_on_data (char *data, size_t size, size_t count, void *arg)
{
    s_watch_t *self = (s_watch_t *) arg;
    size_t len = size * count;
    if (self->size + len > ETCDWATCH_MAX_MESSAGE) {
        self->too_long = true;
        return 0;
    }
    char *grown = (char *) realloc (self->buffer, self->size + len + 1);
    if (!grown)
        return 0;
    self->buffer = grown;
    memcpy (self->buffer + self->size, data, len);
    self->size += len;
    self->buffer [self->size] = 0;
    return len;
}

//  A 64-bit number the gateway sends as a string (or leaves out: 0).
static int64_t
s_int64 (json_t *value)
{
    if (json_is_integer (value))
        return json_integer_value (value);
    const char *text = json_string_value (value);
    return text ? strtoll (text, NULL, 10) : 0;
}

//  The base64 VALUE decoded, as a new string ("" when it cannot be).
static char *
s_unbase64 (json_t *value)
{
    const char *text = json_string_value (value);
    size_t len = json_string_length (value);
    gnutls_datum_t in = { (unsigned char *) text, (unsigned int) len };
    gnutls_datum_t out = { NULL, 0 };
    if (!text || !len || len > 2 * ETCD_MAX_VALUE
        || gnutls_base64_decode2 (&in, &out) != 0)
        return strdup ("");
    char *decoded = strndup ((const char *) out.data, out.size);
    gnutls_free (out.data);
    return decoded;
}

//  One object of the stream.
static void
s_on_object (s_watch_t *self, json_t *object)
{
    json_t *result = json_object_get (object, "result");
    if (!json_is_object (result)) {
        json_t *error = json_object_get (object, "error");
        json_t *message = json_is_object (error)
                          ? json_object_get (error, "message") : NULL;
        s_break (self, json_is_string (message)
                       ? json_string_value (message)
                       : "an answer that is not the gateway's watch");
        return;
    }
    int64_t revision = s_int64 (json_object_get (
        json_object_get (result, "header"), "revision"));
    if (json_is_true (json_object_get (result, "canceled"))) {
        //  Compacted past where it was to start: from the present
        if (s_int64 (json_object_get (result, "compact_revision")) > 0)
            self->next_revision = 0;
        s_break (self, "etcd cancelled the watch");
        return;
    }
    if (json_is_true (json_object_get (result, "created"))) {
        if (revision > 0)
            self->next_revision = revision + 1;
        self->up = true;
        self->broken_said = false;
        s_say (self, "WATCHING", revision, NULL, NULL);
    }
    json_t *events = json_object_get (result, "events");
    for (size_t index = 0; index < json_array_size (events); index++) {
        json_t *event = json_array_get (events, index);
        json_t *kv = json_object_get (event, "kv");
        const char *type = json_string_value (json_object_get (event,
                                                               "type"));
        int64_t mod_revision = s_int64 (json_object_get (kv, "mod_revision"));
        if (!json_is_object (kv) || mod_revision <= 0) {
            s_break (self, "an event that is not the gateway's");
            return;
        }
        if (mod_revision >= self->next_revision)
            self->next_revision = mod_revision + 1;
        if (type && strcmp (type, "DELETE") == 0) {
            s_say (self, "DELETE", mod_revision, NULL, NULL);
            continue;
        }
        char *value = s_unbase64 (json_object_get (kv, "value"));
        char lease [32];
        snprintf (lease, sizeof lease, "%" PRId64,
                  s_int64 (json_object_get (kv, "lease")));
        s_say (self, "PUT", s_int64 (json_object_get (kv, "create_revision")),
               lease, value);
        free (value);
    }
}

//  Takes every whole object out of the buffer.
static void
s_parse (s_watch_t *self)
{
    size_t used = 0;
    while (!*self->broken) {
        size_t end = etcdwatch_object_end (self->buffer + used,
                                           self->size - used);
        if (end == 0)
            break;
        json_error_t error;
        json_t *object = json_loadb (self->buffer + used, end, 0, &error);
        used += end;
        if (!json_is_object (object))
            s_break (self, "a stream that is not JSON");
        else
            s_on_object (self, object);
        json_decref (object);
    }
    if (used) {
        memmove (self->buffer, self->buffer + used, self->size - used);
        self->size -= used;
    }
}

static void
s_close (s_watch_t *self)
{
    if (self->curl) {
        curl_multi_remove_handle (self->multi, self->curl);
        curl_easy_cleanup (self->curl);
        self->curl = NULL;
    }
    curl_slist_free_all (self->headers);
    self->headers = NULL;
    free (self->buffer);
    self->buffer = NULL;
    self->size = 0;
    self->too_long = false;
}

//  Ends the stream (self->broken says why), says so, and retries later
//  on the next endpoint.
static void
s_down (s_watch_t *self)
{
    s_close (self);
    if (self->up || !self->broken_said)
        zstr_sendx (self->pipe, "BROKEN", self->broken, NULL);
    self->up = false;
    self->broken_said = true;
    *self->broken = 0;
    etcd_endpoint_skip (self->etcd);
    self->retry_ms = zclock_mono () + ETCDWATCH_RETRY_MS;
}

static void
s_open (s_watch_t *self)
{
    gnutls_datum_t in = { (unsigned char *) self->key,
                          (unsigned int) strlen (self->key) };
    gnutls_datum_t key64 = { NULL, 0 };
    if (gnutls_base64_encode2 (&in, &key64) != 0) {
        s_break (self, "out of memory");
        s_down (self);
        return;
    }
    json_t *request = json_pack ("{s:{s:s%}}", "create_request", "key",
                                 (const char *) key64.data,
                                 (size_t) key64.size);
    gnutls_free (key64.data);
    if (request && self->next_revision > 0) {
        char text [32];
        snprintf (text, sizeof text, "%" PRId64, self->next_revision);
        json_object_set_new (json_object_get (request, "create_request"),
                             "start_revision", json_string (text));
    }
    free (self->body);
    self->body = request ? json_dumps (request, JSON_COMPACT) : NULL;
    json_decref (request);
    self->curl = self->body ? curl_easy_init () : NULL;
    if (!self->curl) {
        s_break (self, "out of memory");
        s_down (self);
        return;
    }
    char url [512];
    snprintf (url, sizeof url, "%s/v3/watch", etcd_endpoint (self->etcd));
    self->headers = curl_slist_append (NULL, "Content-Type: application/json");
    CURL *curl = self->curl;
    curl_easy_setopt (curl, CURLOPT_URL, url);
    curl_easy_setopt (curl, CURLOPT_HTTPHEADER, self->headers);
    curl_easy_setopt (curl, CURLOPT_POSTFIELDS, self->body);
    curl_easy_setopt (curl, CURLOPT_CONNECTTIMEOUT_MS, (long) S_CONNECT_MS);
    curl_easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt (curl, CURLOPT_TCP_KEEPIDLE, (long) S_KEEPIDLE_S);
    curl_easy_setopt (curl, CURLOPT_TCP_KEEPINTVL, (long) S_KEEPINTVL_S);
    curl_easy_setopt (curl, CURLOPT_WRITEFUNCTION, s_on_data);
    curl_easy_setopt (curl, CURLOPT_WRITEDATA, self);
    curl_multi_add_handle (self->multi, curl);
}

//  Drives the stream: reads what came, notices its end.
static void
s_drive (s_watch_t *self)
{
    int running = 0;
    curl_multi_perform (self->multi, &running);
    s_parse (self);
    int queued = 0;
    CURLMsg *done;
    while ((done = curl_multi_info_read (self->multi, &queued))) {
        if (done->msg != CURLMSG_DONE || done->easy_handle != self->curl)
            continue;
        long status = 0;
        curl_easy_getinfo (self->curl, CURLINFO_RESPONSE_CODE, &status);
        char why [300];
        if (done->data.result != CURLE_OK)
            snprintf (why, sizeof why, "%s", self->too_long
                      ? "an answer too long"
                      : curl_easy_strerror (done->data.result));
        else
            snprintf (why, sizeof why, "the stream ended (HTTP %ld)",
                      status);
        s_break (self, why);
    }
    if (*self->broken)
        s_down (self);
}

static void
s_actor (zsock_t *pipe, void *arg)
{
    s_watch_t *self = (s_watch_t *) arg;
    self->pipe = pipe;
    zsock_signal (pipe, 0);
    while (!self->terminated) {
        int64_t now_ms = zclock_mono ();
        if (!self->curl && now_ms >= self->retry_ms)
            s_open (self);
        if (self->curl)
            s_drive (self);
        //  The pipe's descriptor says only that something may have come:
        //  ask before each wait (zmq_getsockopt ZMQ_FD)
        while (zsock_events (pipe) & ZMQ_POLLIN) {
            char *command = zstr_recv (pipe);
            if (!command || streq (command, "$TERM"))
                self->terminated = true;
            free (command);
            if (self->terminated)
                break;
        }
        if (self->terminated)
            break;
        now_ms = zclock_mono ();
        int64_t wait_ms = self->curl ? 1000 : self->retry_ms - now_ms;
        if (wait_ms < 0)
            wait_ms = 0;
        struct curl_waitfd extra = {
            .fd = zsock_fd (pipe), .events = CURL_WAIT_POLLIN, .revents = 0
        };
        curl_multi_poll (self->multi, &extra, 1, (int) wait_ms, NULL);
    }
    s_close (self);
    curl_multi_cleanup (self->multi);
    etcd_destroy (&self->etcd);
    free (self->key);
    free (self->body);
    free (self);
}

zactor_t *
etcdwatch_new (const char *endpoints, const char *key, char *err,
               size_t err_len)
{
    s_watch_t *self = (s_watch_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_len, "out of memory");
        return NULL;
    }
    //  etcd_new also starts libcurl, before this thread uses it
    self->etcd = etcd_new (endpoints, S_CONNECT_MS, err, err_len);
    self->key = strdup (key ? key : "");
    self->multi = self->etcd ? curl_multi_init () : NULL;
    if (!self->multi || !self->key) {
        if (self->etcd)
            snprintf (err, err_len, "cannot start libcurl");
        etcd_destroy (&self->etcd);
        free (self->key);
        free (self);
        return NULL;
    }
    return zactor_new (s_actor, self);
}
