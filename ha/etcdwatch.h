/*  =========================================================================
    etcdwatch - a watch of one etcd key, streamed on its own thread

    A broker cluster's members learn that the leader key went (its holder
    resigned, or its lease lapsed) from an etcd watch rather than by
    reading the key again and again: etcd's v3 JSON gateway answers a POST
    /v3/watch with a stream of JSON objects, one per change, for as long
    as the connection lives. The stream never ends by itself, so it runs
    here, in a thread of its own (a zactor) with libcurl's multi interface,
    which also waits on the actor's pipe: a $TERM ends it at once.

    A stream that breaks (the endpoint went away, an answer that is not the
    gateway's, etcd cancelled the watch) is said once (BROKEN) and opened
    again on the next endpoint after ETCDWATCH_RETRY_MS, from the revision
    after the last one it saw, so no change in between is missed (when
    etcd compacted that revision away, from the present: the actor says
    BROKEN first, so the owner reads the key again). The owner keeps
    reading the key itself, more slowly, as the fallback while the stream
    is not up, and as a check against a stream that went silent (TCP
    keepalives end a connection whose peer vanished, in about 20 s).

    The actor's pipe says (each a zmsg of strings):
        "WATCHING" REVISION              the stream is up, from REVISION
        "PUT" CREATE_REVISION LEASE VALUE    the key was written
        "DELETE" MOD_REVISION            the key was deleted (by its
                                         owner, or its lease lapsed)
        "BROKEN" WHY                     the stream is down (it retries)
    and takes "$TERM" only.

    Threading: the actor is its own thread; its arguments are copied.
    =========================================================================
*/
#ifndef GRID_ETCDWATCH_H
#define GRID_ETCDWATCH_H

#include <czmq.h>
#include <stddef.h>

#define ETCDWATCH_RETRY_MS 1000      //  A broken stream is opened again
#define ETCDWATCH_MAX_MESSAGE (256 * 1024)  //  Longest object of the
                                            //  stream (more: broken)

//  Watches KEY on ENDPOINTS (etcd.h's comma-separated base URLs). Returns
//  NULL with a sentence in ERR when ENDPOINTS holds no URL.
zactor_t *etcdwatch_new (const char *endpoints, const char *key, char *err,
                         size_t err_len);

//  The offset just past the first whole JSON object of DATA (SIZE bytes),
//  whitespace before it skipped; 0 when no object is whole yet. Exposed
//  for the tests.
size_t etcdwatch_object_end (const char *data, size_t size);

#endif
