/*  =========================================================================
    role - what a client may do: viewer, operator or admin

    A client key's role comes from the config (auth.h), an HTTP token's
    from the token store (token.h); the request table (requests.h) names
    the least role each request type needs. The roles are ordered: a
    higher one may do all that a lower one may.

    Threading: pure functions, any thread.
    =========================================================================
*/
#ifndef GRID_BROKER_ROLE_H
#define GRID_BROKER_ROLE_H

typedef enum {
    AUTH_ROLE_NONE = 0,          //  No access
    AUTH_ROLE_VIEWER,            //  Reads; submits of query actions
    AUTH_ROLE_OPERATOR,          //  Also modify actions, cancel, delete
    AUTH_ROLE_ADMIN              //  Also keys, drain
} auth_role_t;

//  "viewer", "operator", "admin" (or "none").
const char *auth_role_name (auth_role_t role);

//  Parses a role name; returns AUTH_ROLE_NONE when TEXT is none of them.
auth_role_t auth_role_parse (const char *text);

#endif
