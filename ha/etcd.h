/*  =========================================================================
    etcd - a small client of etcd's v3 JSON gateway (etcd 3.4)

    What a broker cluster needs of its coordinator (docs/HA.md): leases
    (grant, keep alive, revoke), a key created only when it does not exist
    (the leader key: its create revision is the epoch), a key replaced
    only when it was not changed meanwhile (the sync set), reads, and a
    delete only of the key one made. It speaks HTTP/1.1 with libcurl to
    the gateway's POST /v3/... routes, with JSON bodies (jansson); keys
    and values travel base64-encoded, 64-bit numbers as strings.

    Endpoints: a comma-separated list of base URLs ("http://10.0.0.1:2379,
    http://10.0.0.2:2379"). A call that cannot reach one (connection
    refused, timeout, a 5xx) tries the next, once each, and the client
    keeps the last one that answered for the next call. An answer that
    says no (a compare that failed, a lease that is gone) is an answer,
    not a failure.

    Every call blocks for at most the client's timeout per endpoint: run
    it off a reactor's thread (ha/elector.h does).

    Returns: 0 or 1 as each function says, ETCD_EIO when no endpoint
    answered (etcd_error says why), ETCD_EPROTO for an answer that is not
    what the gateway sends.

    Threading: one client per thread.
    =========================================================================
*/
#ifndef GRID_ETCD_H
#define GRID_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ETCD_EIO -1       //  No endpoint answered
#define ETCD_EPROTO -2    //  An answer that is not the gateway's
#define ETCD_MAX_VALUE (64 * 1024)  //  Longest value read or written

typedef struct _etcd_t etcd_t;

//  A key's value and revisions, as a read or a failed create found it.
typedef struct {
    char *value;                 //  Its bytes, NUL-terminated (owned)
    size_t size;                 //  How many, without the NUL
    int64_t create_revision;     //  Revision that created it (0: none)
    int64_t mod_revision;        //  Revision of its last change
    int64_t lease;               //  The lease it is attached to (0: none)
} etcd_kv_t;

//  A client of ENDPOINTS (comma-separated base URLs) whose calls wait
//  at most TIMEOUT_MS for each endpoint. Returns NULL with a sentence in
//  ERR when ENDPOINTS holds no URL of the form http://HOST:PORT or
//  https://HOST:PORT.
etcd_t *etcd_new (const char *endpoints, int64_t timeout_ms, char *err,
                  size_t err_len);

//  Frees the client; NULL-safe, nulls *self_p.
void etcd_destroy (etcd_t **self_p);

//  Why the last call failed (a sentence naming the endpoint), or "".
const char *etcd_error (etcd_t *self);

//  The endpoint the next call goes to first.
const char *etcd_endpoint (etcd_t *self);

//  The next call goes to the endpoint after that one first (a watch
//  whose stream broke there, ha/etcdwatch.h).
void etcd_endpoint_skip (etcd_t *self);

//  Grants a lease of TTL_S seconds into *ID_P. Returns 0 or an error.
int etcd_lease_grant (etcd_t *self, int64_t ttl_s, int64_t *id_p);

//  Renews lease ID. Returns 1 with its TTL in *TTL_P, 0 when the lease is
//  gone (expired or revoked), or an error.
int etcd_lease_keepalive (etcd_t *self, int64_t id, int64_t *ttl_p);

//  How long lease ID still lives, in whole seconds (etcd rounds down)
//  into *TTL_P. Returns 1 while it lives (*TTL_P may be 0: under a
//  second), 0 when it is gone, or an error.
int etcd_lease_ttl (etcd_t *self, int64_t id, int64_t *ttl_p);

//  Revokes lease ID (its keys go with it). Returns 0 (also when it was
//  gone already) or an error.
int etcd_lease_revoke (etcd_t *self, int64_t id);

//  Creates KEY with VALUE (SIZE bytes) attached to LEASE (0: none), only
//  if KEY does not exist. Returns 1 when it did, with *REVISION_P the
//  revision that created it; 0 when KEY exists, with what it holds in
//  *HOLDER (clear it with etcd_kv_clear); or an error.
int etcd_create (etcd_t *self, const char *key, const void *value,
                 size_t size, int64_t lease, int64_t *revision_p,
                 etcd_kv_t *holder);

//  As etcd_create, and only if GUARD's mod revision is still
//  GUARD_REVISION (0: only if GUARD does not exist), in one transaction
//  (GUARD NULL: no guard). Returns 0 with HOLDER zeroed when KEY is free
//  but GUARD changed.
int etcd_create_guarded (etcd_t *self, const char *key, const void *value,
                         size_t size, int64_t lease, const char *guard,
                         int64_t guard_revision, int64_t *revision_p,
                         etcd_kv_t *holder);

//  Reads KEY into *KV. Returns 1 when it exists, 0 when not (KV zeroed),
//  or an error.
int etcd_get (etcd_t *self, const char *key, etcd_kv_t *kv);

//  Writes VALUE (SIZE bytes) to KEY only if its mod revision is still
//  MOD_REVISION (0: only if KEY does not exist). Returns 1 when written,
//  with the new mod revision in *REVISION_P; 0 when KEY changed
//  meanwhile; or an error.
int etcd_replace (etcd_t *self, const char *key, const void *value,
                  size_t size, int64_t mod_revision, int64_t *revision_p);

//  As etcd_replace, and only if FENCE is still the key created at
//  FENCE_REVISION (a leader writing only while it holds its key), in one
//  transaction (FENCE NULL: no fence).
int etcd_replace_fenced (etcd_t *self, const char *key, const void *value,
                         size_t size, int64_t mod_revision, const char *fence,
                         int64_t fence_revision, int64_t *revision_p);

//  Deletes KEY only if it is the one created at CREATE_REVISION (ours).
//  Returns 1 when deleted, 0 when KEY is another's or gone, or an error.
int etcd_delete_own (etcd_t *self, const char *key, int64_t create_revision);

//  Frees what KV holds and zeroes it; NULL-safe.
void etcd_kv_clear (etcd_kv_t *kv);

#endif
