/*  =========================================================================
    listener - wait until a closed listener's address can be bound again
    (see listener.h)
    =========================================================================
*/
#include "listener.h"

#include <czmq.h>
#include <netdb.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define S_WAIT_STEPS 100         //  Tries, S_WAIT_STEP_MS apart
#define S_WAIT_STEP_MS 10

static void
s_ipc_released (const char *path)
{
    for (int waited = 0; waited < S_WAIT_STEPS && access (path, F_OK) == 0;
         waited++)
        zclock_sleep (S_WAIT_STEP_MS);
}

//  True when a TCP socket can bind ADDRESS now (with SO_REUSEADDR, as
//  libzmq binds).
static bool
s_tcp_bindable (const struct addrinfo *address)
{
    int fd = socket (address->ai_family, SOCK_STREAM, 0);
    if (fd < 0)
        return true;
    int on = 1;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    bool bindable = bind (fd, address->ai_addr, address->ai_addrlen) == 0;
    close (fd);
    return bindable;
}

static void
s_tcp_released (const char *address)
{
    char host [256];
    snprintf (host, sizeof host, "%s", address);
    char *colon = strrchr (host, ':');
    if (!colon)
        return;
    *colon = 0;
    const char *port = colon + 1;
    char *name = host;
    size_t len = strlen (name);
    if (len >= 2 && name [0] == '[' && name [len - 1] == ']') {
        name [len - 1] = 0;
        name++;
    }
    struct addrinfo hints = {
        .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
        .ai_socktype = SOCK_STREAM
    };
    struct addrinfo *found = NULL;
    if (getaddrinfo (strcmp (name, "*") == 0 ? NULL : name, port, &hints,
                     &found))
        return;
    for (int waited = 0; waited < S_WAIT_STEPS && !s_tcp_bindable (found);
         waited++)
        zclock_sleep (S_WAIT_STEP_MS);
    freeaddrinfo (found);
}

void
listener_released (const char *endpoint)
{
    if (!endpoint)
        return;
    if (strncmp (endpoint, "ipc://", 6) == 0)
        s_ipc_released (endpoint + 6);
    else
    if (strncmp (endpoint, "tcp://", 6) == 0)
        s_tcp_released (endpoint + 6);
}
