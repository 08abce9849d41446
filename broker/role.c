/*  =========================================================================
    role - what a client may do (see role.h)
    =========================================================================
*/
#include <string.h>

#include "role.h"

const char *
auth_role_name (auth_role_t role)
{
    switch (role) {
        case AUTH_ROLE_VIEWER: return "viewer";
        case AUTH_ROLE_OPERATOR: return "operator";
        case AUTH_ROLE_ADMIN: return "admin";
        default: return "none";
    }
}

auth_role_t
auth_role_parse (const char *text)
{
    if (text && strcmp (text, "viewer") == 0)
        return AUTH_ROLE_VIEWER;
    if (text && strcmp (text, "operator") == 0)
        return AUTH_ROLE_OPERATOR;
    if (text && strcmp (text, "admin") == 0)
        return AUTH_ROLE_ADMIN;
    return AUTH_ROLE_NONE;
}
