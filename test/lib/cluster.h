/*  =========================================================================
    cluster - a two-member broker cluster for integration tests: one etcd
    (etcdproc.h) on loopback and two gridbrokers "a" and "b", each in a
    harness directory of its own (harness.h), insecure, with an ha: config
    that names the other as its peer

    cluster_pair_setup and cluster_pair_teardown are cmocka setup and
    teardown functions (the state is a cluster_pair_t); nothing is started
    but etcd, and nothing at all when etcd is not installed
    (cluster_pair_skip says so). Waits poll with a deadline.

    Threading: the test's thread.
    =========================================================================
*/
#ifndef GRID_TEST_CLUSTER_H
#define GRID_TEST_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "etcdproc.h"
#include "harness.h"

#define CLUSTER_PAIR_WAIT_MS 20000   //  What a wait gives, at most

typedef struct {
    char dir [300];
    etcdproc_t etcd;
    grid_t member [2];           //  Brokers "a" and "b", each its own dir
    char config [2][400];
    char repl_ep [2][400];
    int http_port [2];           //  With faces: each member's HTTP port
    bool faces;                  //  Configs with http: and the peers'
                                 //  agents and http
    const char *offline_grace;   //  The brokers' --offline-grace, NULL:
                                 //  the harness's (1s)
    const char *sync_timeout;    //  ha.sync_timeout, NULL: 1s
    const char *const *spawn_args;  //  More broker flags (NULL-ended), or
                                    //  NULL
    int wait_ms;                 //  What a wait gives, 0:
                                 //  CLUSTER_PAIR_WAIT_MS
} cluster_pair_t;

//  The members' names: "a" and "b".
extern const char *cluster_pair_names [2];

//  cmocka setup: a directory, etcd, the two members' harness directories
//  and configs (a TTL of 2 s). Returns 0 or -1.
int cluster_pair_setup (void **state);

//  Writes both members' configs again (after a change of sync_timeout
//  or faces) with a lease TTL of 2 s.
void cluster_pair_write_configs (cluster_pair_t *self);

//  Both members' logs to stderr.
void cluster_pair_dump (cluster_pair_t *self);

//  cmocka teardown: stops everything and removes the directories.
int cluster_pair_teardown (void **state);

//  Writes member WHICH's config with a lease TTL of TTL_S seconds (and,
//  with faces, the peers' agent endpoints and HTTP).
void cluster_pair_write_config (cluster_pair_t *self, int which,
                                int64_t ttl_s);

//  Every member's config names its HTTP face and the peer's agent
//  endpoint (a standby then redirects agents and relays to the active).
void cluster_pair_faces (cluster_pair_t *self);

//  A free TCP port on loopback.
int cluster_pair_free_port (void);

//  True (and says so) when etcd is not installed: the test returns.
bool cluster_pair_skip (cluster_pair_t *self);

//  Starts member WHICH's broker without waiting for it (with its config,
//  offline_grace and spawn_args when set).
void cluster_pair_spawn (cluster_pair_t *self, int which);

//  The code of a status request to member WHICH ("ok" when it serves),
//  or NULL when it did not answer; the caller frees it.
char *cluster_pair_status_code (cluster_pair_t *self, int which);

//  Waits until member WHICH answers status with CODE (logs dumped if
//  not).
bool cluster_pair_wait_code (cluster_pair_t *self, int which,
                             const char *code);

//  Waits until member WHICH's log holds TEXT.
bool cluster_pair_wait_log (cluster_pair_t *self, int which,
                            const char *text);

#endif
