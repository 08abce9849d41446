/*  =========================================================================
    requests - the one table of client request types

    One row per request type of proto/PROTOCOL.md: the least role that may
    send it, whether it changes state (such requests are remembered by
    request id, so a retry gets the first answer and never acts twice),
    and its handler (req/req.h). Auth, the reply cache and the dispatch
    all read this table; the HTTP face's routes name only its rows
    (test_requests checks both against the protocol's schemas).

    Threading: the table is constant; requests_handle runs on the broker's
    thread.
    =========================================================================
*/
#ifndef GRID_BROKER_REQUESTS_H
#define GRID_BROKER_REQUESTS_H

#include "auth.h"
#include "req/req.h"

typedef struct {
    const char *type;            //  The wire type ("job.submit")
    auth_role_t role;            //  The least role that may send it
    bool mutates;                //  It changes state: its reply is kept
                                 //  for retries of the same request id
    bool audited;                //  It changes something: each one handled
                                 //  is recorded in the audit trail (audit.h)
    req_handler_fn *handler;     //  Serves it
    bool (*refused) (req_call_t *call);  //  Or NULL: a check before the
                                 //  reply cache (true: it wrote the error)
} requests_row_t;

//  The row of request TYPE, or NULL when there is none.
const requests_row_t *requests_find (const char *type);

//  Every row, in the table's order; *COUNT_P gets how many.
const requests_row_t *requests_rows (size_t *count_p);

//  Admits one decoded request (call->request from call->caller): finds
//  its row, identifies the caller (call->role, call->name) and checks its
//  role and the row's own check. Returns the row, or NULL after writing
//  the whole error reply (unauthorized, forbidden, unknown_type) into
//  call->reply. Nothing is changed before a request is admitted.
const requests_row_t *requests_admit (req_call_t *call);

#endif
