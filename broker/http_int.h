/*  =========================================================================
    http_int - what the HTTP face's files share and nobody else sees:
    http.c (the actor) and http_config.c (its configuration)
    =========================================================================
*/
#ifndef GRID_BROKER_HTTP_INT_H
#define GRID_BROKER_HTTP_INT_H

#include <netdb.h>
#include <stddef.h>

#define HTTP_CONNECTIONS_MAX 4096  //  Open HTTP connections at most
#define HTTP_IDLE_TIMEOUT_S 30     //  A connection idle this long is closed
#define HTTP_PER_IP_DEFAULT 1024   //  Connections from one address at most

//  Resolves LISTEN ("ADDR:PORT" or "[V6]:PORT") into *ADDR_P (the caller
//  frees it with freeaddrinfo). Returns 0, or -1 with a sentence in ERR.
int http_listen_resolve (const char *listen, struct addrinfo **addr_p,
                         char *err, size_t err_len);

#endif
