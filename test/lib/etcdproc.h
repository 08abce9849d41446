/*  =========================================================================
    etcdproc - one etcd member for tests, on loopback

    Starts /usr/bin/etcd (Debian's etcd-server) as a one-member cluster
    with its data in a directory of the test's, on two free ports of
    127.0.0.1, and stops it by its pid. Tests that need it call
    etcdproc_available first and skip when etcd is not installed.

    Threading: the test's thread.
    =========================================================================
*/
#ifndef GRID_ETCDPROC_H
#define GRID_ETCDPROC_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;                //  The running etcd, 0 when none
    char url [64];            //  Its client URL: http://127.0.0.1:PORT
    char dir [400];           //  Its data directory
    int client_port;
    int peer_port;
} etcdproc_t;

//  True when the etcd program is installed.
bool etcdproc_available (void);

//  Starts etcd with its data in DIR/etcd (made), waits until it answers
//  (at most 20 s). Returns 0, or -1 (a line on stderr says why; nothing
//  is left running).
int etcdproc_start (etcdproc_t *proc, const char *dir);

//  Stops it (SIGKILL when HARD, else SIGTERM and wait), reaps it.
void etcdproc_stop (etcdproc_t *proc, bool hard);

//  Sends SIGNAL to the running etcd (SIGSTOP, SIGCONT...).
void etcdproc_signal (etcdproc_t *proc, int signal);

#endif
