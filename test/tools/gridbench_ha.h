/*  =========================================================================
    gridbench_ha - gridbench's broker cluster: etcd and a standby beside
    the measured broker, and the failover measurement

    A part of gridbench (linked into it, not a tool of its own). gridbench
    --ha measures the same figures twice, a broker alone and a two-broker
    cluster on loopback: for the cluster, bench_ha_begin starts one etcd
    and writes the measured broker's ha: config (it becomes the active,
    member a), and once it serves, bench_ha_standby starts member b and
    waits until it is in the sync set; bench_ha_end stops both.

    bench_ha_failover measures failover time apart, on a cluster of its
    own with the default lease (10 s) and three real gridagents that know
    both members: KILLS times, the active is SIGKILLed and the clock runs
    until a one-node job submitted to both members' endpoints has
    completed on the new active; the killed member is started again and
    waits in sync before the next kill. Every job acknowledged is read
    back at the end (lost: missing or not completed; duplicated: a node
    that ended a step twice).

    Processes are started and stopped through gridbench's own functions
    (bench_ha_procs_t), so that its signal handling stops them too.

    Threading: single-threaded.
    =========================================================================
*/
#ifndef GRID_GRIDBENCH_HA_H
#define GRID_GRIDBENCH_HA_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

//  gridbench's process functions.
typedef struct {
    pid_t (*spawn) (char *const argv [], const char *log);
    void (*stop) (pid_t *pid_p, int grace_ms);
    bool (*alive) (pid_t pid);
    volatile sig_atomic_t *interrupted;
} bench_ha_procs_t;

typedef struct {
    const bench_ha_procs_t *procs;
    const char *bin;            //  gridbroker, gridagent
    char dir [300];             //  The cluster's files
    pid_t etcd_pid;
    char etcd_url [64];
    pid_t standby_pid;
    char config [2][400];       //  a.yaml, b.yaml
    char client_ep [2][64];
    char agents_ep [2][64];
    char publish_ep [2][64];
    char repl_ep [2][64];
    char log [2][400];
    int ttl_s;
    char broker_key [400];      //  Public key file of a CURVE run, "" else
} bench_ha_t;

//  Starts etcd in DIR/ha (made) and writes member a's config, for the
//  broker whose endpoints are CLIENT, AGENTS and PUBLISH; its log is
//  LOG_A. BROKER_KEY: the broker key pair's public file (CURVE), or NULL.
//  TTL_S: the lease. On success, CONFIG_P points at a's config (pass it
//  with --config). Returns 0, or -1 with a line said on stderr.
int bench_ha_begin (bench_ha_t *self, const bench_ha_procs_t *procs,
                    const char *bin, const char *dir, const char *client,
                    const char *agents, const char *publish,
                    const char *log_a, const char *broker_key, int ttl_s,
                    const char **config_p);

//  Starts member b with EXTRA (security arguments: the same as a's,
//  NULL-terminated) and waits until a's log says b is in sync (up to
//  60 s). Returns 0 or -1.
int bench_ha_standby (bench_ha_t *self, char *const *extra);

//  Stops b and etcd (a is the caller's).
void bench_ha_end (bench_ha_t *self);

//  The failover figures.
typedef struct {
    size_t kills;               //  Asked for
    size_t measured;            //  Failovers timed
    double p50_s, max_s, min_s;
    size_t jobs;                //  Jobs acknowledged over the run
    size_t lost, duplicated;
    char error [256];           //  Why it stopped early, "" when it did not
} bench_ha_failover_t;

//  The failover run (see above) in DIR/failover, KILLS times, plaintext
//  (--insecure: the figure is the lease's and the agents' timing). The
//  active is sent SIGNAL: SIGKILL (its lease lapses) or SIGTERM (it
//  resigns its key: a handover).
void bench_ha_failover (const bench_ha_procs_t *procs, const char *bin,
                        const char *dir, size_t kills, int signal,
                        bench_ha_failover_t *figures);

#endif
