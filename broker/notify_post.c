/*  =========================================================================
    notify_post - the webhook workers (see notify_post.h)
    =========================================================================
*/
#include <curl/curl.h>
#include <gnutls/crypto.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "notify_post.h"

void
notify_post_init (void)
{
    static bool ready = false;
    if (!ready) {
        curl_global_init (CURL_GLOBAL_DEFAULT);
        ready = true;
    }
}

static void
s_hex (const uint8_t *bytes, size_t len, char *text)
{
    static const char digits [] = "0123456789abcdef";
    for (size_t index = 0; index < len; index++) {
        text [2 * index] = digits [bytes [index] >> 4];
        text [2 * index + 1] = digits [bytes [index] & 15];
    }
    text [2 * len] = 0;
}

int
notify_post_sign (const char *secret, int64_t unix_s, const void *body,
                  size_t body_len, char *buf, size_t size)
{
    char stamp [32];
    int stamp_len = snprintf (stamp, sizeof stamp, "%" PRId64 ".", unix_s);
    size_t total = (size_t) stamp_len + body_len;
    char *signed_text = (char *) malloc (total + 1);
    if (!signed_text)
        return -1;
    memcpy (signed_text, stamp, (size_t) stamp_len);
    memcpy (signed_text + stamp_len, body, body_len);
    uint8_t digest [32];
    int rc = gnutls_hmac_fast (GNUTLS_MAC_SHA256, secret, strlen (secret),
                               signed_text, total, digest);
    free (signed_text);
    if (rc < 0)
        return -1;
    char hex [65];
    s_hex (digest, sizeof digest, hex);
    snprintf (buf, size, "t=%" PRId64 ",v1=%s", unix_s, hex);
    return 0;
}

//  The response is read and dropped, up to a cap: a huge answer ends the
//  transfer (its status line already came).
static size_t
s_on_body (char *data, size_t size, size_t count, void *arg)
{
    size_t *seen = (size_t *) arg;
    *seen += size * count;
    return *seen > NOTIFY_POST_RESPONSE_MAX ? 0 : size * count;
}

static int
s_on_progress (void *arg, curl_off_t dltotal, curl_off_t dlnow,
               curl_off_t ultotal, curl_off_t ulnow)
{
    return atomic_load ((atomic_bool *) arg) ? 1 : 0;
}

//  One POST; fills *CODE and ERROR (SIZE bytes). Returns true on a 2xx.
static bool
s_post (const char *url, const char *body, const char *secret,
        long timeout_ms, const char *delivery, const char *job,
        const char *attempt, atomic_bool *stopping, long *code, char *error,
        size_t size)
{
    *code = 0;
    *error = '\0';
    CURL *curl = curl_easy_init ();
    if (!curl) {
        snprintf (error, size, "cannot start an HTTP client");
        return false;
    }
    struct curl_slist *headers = NULL;
    char line [256];
    headers = curl_slist_append (headers, "Content-Type: application/json");
    headers = curl_slist_append (headers, "Expect:");
    snprintf (line, sizeof line, "X-Grid-Event: job.finished");
    headers = curl_slist_append (headers, line);
    snprintf (line, sizeof line, "X-Grid-Delivery: %s", delivery);
    headers = curl_slist_append (headers, line);
    snprintf (line, sizeof line, "X-Grid-Job: %s", job);
    headers = curl_slist_append (headers, line);
    snprintf (line, sizeof line, "X-Grid-Attempt: %s", attempt);
    headers = curl_slist_append (headers, line);
    if (*secret) {
        char signature [128];
        if (notify_post_sign (secret, (int64_t) time (NULL), body, strlen (body),
                         signature, sizeof signature) == 0) {
            snprintf (line, sizeof line, "X-Grid-Signature: %s", signature);
            headers = curl_slist_append (headers, line);
        }
    }
    size_t seen = 0;
    char curl_error [CURL_ERROR_SIZE] = "";
    curl_easy_setopt (curl, CURLOPT_URL, url);
    curl_easy_setopt (curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (curl, CURLOPT_POST, 1L);
    curl_easy_setopt (curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt (curl, CURLOPT_POSTFIELDSIZE, (long) strlen (body));
    curl_easy_setopt (curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt (curl, CURLOPT_USERAGENT, "gridbroker/" GRID_VERSION);
    curl_easy_setopt (curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt (curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt (curl, CURLOPT_WRITEFUNCTION, s_on_body);
    curl_easy_setopt (curl, CURLOPT_WRITEDATA, &seen);
    curl_easy_setopt (curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt (curl, CURLOPT_XFERINFOFUNCTION, s_on_progress);
    curl_easy_setopt (curl, CURLOPT_XFERINFODATA, stopping);
    curl_easy_setopt (curl, CURLOPT_ERRORBUFFER, curl_error);
    CURLcode rc = curl_easy_perform (curl);
    curl_easy_getinfo (curl, CURLINFO_RESPONSE_CODE, code);
    bool ok = *code >= 200 && *code < 300;
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && ok)) {
        ok = false;
        snprintf (error, size, "%s", *curl_error ? curl_error
                                                 : curl_easy_strerror (rc));
    }
    else
    if (!ok)
        snprintf (error, size, "HTTP %ld%s", *code,
                  *code >= 300 && *code < 400 ? " (redirects are not followed)"
                                              : "");
    curl_slist_free_all (headers);
    curl_easy_cleanup (curl);
    return ok;
}

void
notify_post_actor (zsock_t *pipe, void *args)
{
    notify_post_args_t *post = (notify_post_args_t *) args;
    zsock_t *outcomes = zsock_new_push (post->outcomes_ep);
    zsock_signal (pipe, 0);
    while (outcomes) {
        zmsg_t *msg = zmsg_recv (pipe);
        if (!msg)
            break;
        if (zmsg_size (msg) == 1) {
            //  $TERM
            zmsg_destroy (&msg);
            break;
        }
        zframe_t *key = zmsg_pop (msg);
        char *worker = zmsg_popstr (msg);
        char *url = zmsg_popstr (msg);
        char *body = zmsg_popstr (msg);
        char *secret = zmsg_popstr (msg);
        char *timeout = zmsg_popstr (msg);
        char *delivery = zmsg_popstr (msg);
        char *job = zmsg_popstr (msg);
        char *attempt = zmsg_popstr (msg);
        zmsg_destroy (&msg);
        long code = 0;
        char error [NOTIFY_POST_ERROR_MAX] = "bad request to the worker";
        bool ok = false;
        int64_t started_ms = zclock_mono ();
        if (key && attempt)
            ok = s_post (url, body, secret, atol (timeout), delivery, job,
                         attempt, post->stopping, &code, error, sizeof error);
        if (secret)
            memset (secret, 0, strlen (secret));
        zmsg_t *outcome = zmsg_new ();
        zmsg_append (outcome, &key);
        zmsg_addstr (outcome, worker ? worker : "0");
        zmsg_addstr (outcome, ok ? "1" : "0");
        zmsg_addstrf (outcome, "%ld", code);
        zmsg_addstr (outcome, error);
        zmsg_addstrf (outcome, "%" PRId64, zclock_mono () - started_ms);
        zmsg_send (&outcome, outcomes);
        zstr_free (&worker);
        zstr_free (&url);
        zstr_free (&body);
        zstr_free (&secret);
        zstr_free (&timeout);
        zstr_free (&delivery);
        zstr_free (&job);
        zstr_free (&attempt);
    }
    zsock_destroy (&outcomes);
}
