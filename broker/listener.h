/*  =========================================================================
    listener - wait until a closed listener's address can be bound again

    libzmq closes a socket's listeners in its I/O thread, after
    zsock_destroy returns: an ipc:// listener unlinks its path there, and a
    tcp:// one releases its port there. A cluster member that closes its
    standby's sockets and binds the same endpoints as the active (or the
    other way round) at once could lose the new ipc file to the old
    unlink, or fail with EADDRINUSE on a busy machine. These calls wait,
    a second at most, until the address is free.

    Threading: any thread; they sleep.
    =========================================================================
*/
#ifndef GRID_BROKER_LISTENER_H
#define GRID_BROKER_LISTENER_H

//  Waits (a second at most) until ENDPOINT, a listener this process just
//  closed, can be bound again: an ipc:// path is gone, a tcp:// port can
//  be bound (with SO_REUSEADDR, as libzmq binds). Other transports, and
//  a tcp:// host that does not resolve here (an interface name), are not
//  waited for. NULL-safe.
void listener_released (const char *endpoint);

#endif
