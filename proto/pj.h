/*  =========================================================================
    pj - JSON <-> msgpack values, for faces that speak JSON (HTTP)

    JSON comes and goes as jansson values (json_t); msgpack goes out
    through a pw_t writer and comes in as a decoded pv_t. A JSON object
    becomes a msgpack map with its keys in the order they were written,
    an integer an int, a real a float; a msgpack binary becomes a base64
    string. The request that comes out is then checked by the
    wire codec exactly as one that came over ZeroMQ.

    Threading: no state; any thread.
    =========================================================================
*/
#ifndef GRID_PJ_H
#define GRID_PJ_H

#include <jansson.h>
#include <stddef.h>

#include "pv.h"
#include "pw.h"

//  Writes VALUE to WRITER as one msgpack object. Returns 0, or -2 with a
//  sentence in WHY when VALUE is nested deeper than PV_MAX_DEPTH.
int pj_write (pw_t *writer, const json_t *value, char *why, size_t why_len);

//  A new JSON value (caller json_decref's it) for VALUE; never NULL short
//  of running out of memory. A NULL VALUE gives null.
json_t *pj_from_pv (const pv_t *value);

#endif
