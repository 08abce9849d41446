/*  =========================================================================
    notify_post - the webhook workers: one HTTP(S) POST at a time each,
    off the broker's loop

    A worker is a zactor. The loop (notify.c) sends it one delivery as a
    message on its pipe:

        [key (12 bytes)] [worker index] [url] [body] [secret] [timeout ms]
        [delivery id] [job id] [attempt]

    and the worker POSTs the body with libcurl (no redirects followed,
    http and https only, a response read to NOTIFY_POST_RESPONSE_MAX bytes
    at most, the whole attempt bounded by the timeout), signed when the
    secret is not empty, then pushes the outcome to the loop's PULL socket
    at the endpoint it was started with:

        [key] [worker index] ["1" ok | "0"] [HTTP code] [error] [ms]

    Headers sent: Content-Type: application/json, User-Agent:
    gridbroker/VERSION, X-Grid-Event: job.finished, X-Grid-Delivery: id
    (the same on every attempt: the idempotency key), X-Grid-Job: id,
    X-Grid-Attempt: n, and X-Grid-Signature: t=<unix>,v1=<hex> (notify.h).

    Threading: each worker is its own thread; STOPPING is read by all of
    them and set by the loop's thread before it destroys them.
    =========================================================================
*/
#ifndef GRID_BROKER_NOTIFY_POST_H
#define GRID_BROKER_NOTIFY_POST_H

#include <czmq.h>
#include <stdatomic.h>
#include <stdint.h>

#define NOTIFY_POST_RESPONSE_MAX (64 * 1024)  //  Response bytes read at most
#define NOTIFY_POST_ERROR_MAX 256   //  An attempt's error sentence at most

//  What a worker is started with (borrowed for the worker's life).
typedef struct {
    const char *outcomes_ep;     //  The loop's PULL endpoint (inproc)
    atomic_bool *stopping;       //  Set: cut the attempt under way short
} notify_post_args_t;

//  The worker's body, for zactor_new (notify_post_actor, args).
void notify_post_actor (zsock_t *pipe, void *args);

//  The HMAC-SHA256 signature header value of BODY at UNIX_S with SECRET:
//  "t=<unix>,v1=<hex>" over "<unix>.<body>", into BUF (at least 96 bytes).
//  Returns 0, or -1 when the library fails.
int notify_post_sign (const char *secret, int64_t unix_s, const void *body,
                      size_t body_len, char *buf, size_t size);

//  Makes libcurl ready for threads: call once on the loop's thread before
//  the first worker starts.
void notify_post_init (void);

#endif
