/*  =========================================================================
    etcdproc - one etcd member for tests, on loopback (see etcdproc.h)
    =========================================================================
*/

#include "etcdproc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_ETCD "/usr/bin/etcd"

bool
etcdproc_available (void)
{
    return access (S_ETCD, X_OK) == 0;
}

//  A TCP port of 127.0.0.1 that no one holds now, or -1.
static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    int port = -1;
    if (bind (fd, (struct sockaddr *) &address, sizeof address) == 0
        && getsockname (fd, (struct sockaddr *) &address, &len) == 0)
        port = ntohs (address.sin_port);
    close (fd);
    return port;
}

//  True once something accepts connections on PORT of 127.0.0.1.
static bool
s_listening (int port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    address.sin_port = htons ((uint16_t) port);
    bool up = connect (fd, (struct sockaddr *) &address, sizeof address) == 0;
    close (fd);
    return up;
}

int
etcdproc_start (etcdproc_t *proc, const char *dir)
{
    memset (proc, 0, sizeof *proc);
    proc->client_port = s_free_port ();
    proc->peer_port = s_free_port ();
    if (proc->client_port < 0 || proc->peer_port < 0
        || proc->client_port == proc->peer_port) {
        fprintf (stderr, "etcdproc: no free port\n");
        return -1;
    }
    snprintf (proc->dir, sizeof proc->dir, "%s/etcd", dir);
    mkdir (proc->dir, 0700);
    snprintf (proc->url, sizeof proc->url, "http://127.0.0.1:%d",
              proc->client_port);
    char peer [64], data [450], log [450], cluster [96];
    snprintf (peer, sizeof peer, "http://127.0.0.1:%d", proc->peer_port);
    snprintf (data, sizeof data, "%s/data", proc->dir);
    snprintf (log, sizeof log, "%s/etcd.log", proc->dir);
    snprintf (cluster, sizeof cluster, "test=%s", peer);
    pid_t pid = fork ();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        int out = open (log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (out >= 0) {
            dup2 (out, 1);
            dup2 (out, 2);
            close (out);
        }
        execl (S_ETCD, S_ETCD, "--name", "test", "--data-dir", data,
               "--listen-client-urls", proc->url,
               "--advertise-client-urls", proc->url,
               "--listen-peer-urls", peer,
               "--initial-advertise-peer-urls", peer,
               "--initial-cluster", cluster, (char *) NULL);
        _exit (127);
    }
    proc->pid = pid;
    for (int tries = 0; tries < 200; tries++) {
        int status = 0;
        if (waitpid (pid, &status, WNOHANG) == pid) {
            fprintf (stderr, "etcdproc: etcd exited (see %s)\n", log);
            proc->pid = 0;
            return -1;
        }
        if (s_listening (proc->client_port))
            return 0;
        struct timespec pause = { 0, 100 * 1000 * 1000 };
        nanosleep (&pause, NULL);
    }
    fprintf (stderr, "etcdproc: etcd did not listen in 20 s (see %s)\n",
             log);
    etcdproc_stop (proc, true);
    return -1;
}

void
etcdproc_signal (etcdproc_t *proc, int signal)
{
    if (proc->pid > 0)
        kill (proc->pid, signal);
}

void
etcdproc_stop (etcdproc_t *proc, bool hard)
{
    if (proc->pid <= 0)
        return;
    kill (proc->pid, SIGCONT);
    kill (proc->pid, hard ? SIGKILL : SIGTERM);
    for (int tries = 0; tries < 100; tries++) {
        int status = 0;
        if (waitpid (proc->pid, &status, WNOHANG) == proc->pid) {
            proc->pid = 0;
            return;
        }
        struct timespec pause = { 0, 100 * 1000 * 1000 };
        nanosleep (&pause, NULL);
    }
    kill (proc->pid, SIGKILL);
    waitpid (proc->pid, NULL, 0);
    proc->pid = 0;
}
