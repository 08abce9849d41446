/*  =========================================================================
    audit - the audit trail: who changed what, through which face, when,
    and how it ended

    Every client request that changes something (a row of the request
    table marked audited, requests.h) is recorded in STORE_DB_AUDIT in
    the pass's write transaction, the same one as its effect: both land
    or neither. So are refused attempts (unauthorized, forbidden) of any
    request type, at most one per caller per AUDIT_REFUSED_MS; the next
    one recorded says how many were left out in between (suppressed).
    A configuration reload by SIGHUP is recorded too (config.reload, face
    signal; broker.c), a client key refused at the handshake
    (client.connect, face zmq, one entry per AUDIT_REFUSED_MS for all keys;
    broker.c), and an agent's key rotation (key.rekey, key.switch, face
    agent; broker_agents.c).

    Key: the wall clock in ms (8 bytes big-endian) then a sequence (4
    bytes big-endian), so that keys sort by time; the pair never goes
    back, even when the wall clock does (the entry keeps the clock's own
    reading in at_ms). Value: a msgpack map

        {at_ms: int, face: "zmq" | "http" | "dashboard" | "signal" | "agent",
         who: str,
         role: str, request: str, type: str, ?object: str,
         outcome: "ok" | an error code, ?message: str, ?suppressed: int}

    Nothing edits or deletes an entry but the retention sweep
    (audit_prune). An entry's id in replies is its key in hex (24
    characters), which is also the paging cursor of audit.list.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_AUDIT_H
#define GRID_BROKER_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/names.h"
#include "../proto/pv.h"
#include "../proto/pw.h"
#include "../store/store.h"

#define AUDIT_KEY_LEN STAMP_KEY_LEN  //  ms (8) + seq (4)
#define AUDIT_ID_LEN 24              //  The key in hex
#define AUDIT_REFUSED_MS 10000       //  One refused entry per caller this often
#define AUDIT_CALLERS_MAX 4096       //  Callers whose refusals are tracked
#define AUDIT_LIST_DEFAULT 50        //  audit.list without a limit
#define AUDIT_LIST_MAX 1000          //  audit.list's limit at most
#define AUDIT_SCAN_MAX 100000        //  Entries one audit.list reads at most
#define AUDIT_TEXT_MAX 256           //  A field's bytes kept at most
#define AUDIT_DEFAULT_RETENTION_MS ((int64_t) 90 * 24 * 3600 * 1000)

//  One entry, its strings held whole (cut at a UTF-8 boundary to fit);
//  an empty object or message is none.
typedef struct {
    int64_t at_ms;               //  Wall clock when it was handled
    char face [16];              //  "zmq", "http", "dashboard", "signal"
                                 //  or "agent"
    char who [AUDIT_TEXT_MAX];   //  The key's or token's name (or the key)
    char role [16];              //  Its role, "none" when unknown
    char request [AUDIT_TEXT_MAX];  //  The client's request id
    char type [64];              //  The request type ("job.cancel")
    char object [AUDIT_TEXT_MAX];   //  What it acted on (job id, node, key,
                                 //  token or schedule name), or ""
    char outcome [64];           //  "ok" or the error code
    char message [AUDIT_TEXT_MAX];  //  The error's sentence, or ""
    int64_t suppressed;          //  Refusals of this caller left out before
                                 //  this one (0: none)
} audit_entry_t;

//  What audit_list returns. NULL or 0 fields do not filter.
typedef struct {
    const char *who;             //  Only this caller (exact)
    const char *type;            //  Only this type, or a prefix ending in
                                 //  "." ("job.")
    const char *object;          //  Only about this object (exact)
    const char *outcome;         //  "ok", "error" (any error), "refused"
                                 //  (unauthorized or forbidden) or a code
    int64_t since_ms;            //  Only entries at or after (wall ms)
    const char *before;          //  Only entries older than this id (paging)
    size_t limit;                //  At most this many (0: the default)
} audit_filter_t;

typedef struct _audit_t audit_t;

//  ---------------------------------------------------------------------
//  Records (pure)

//  Writes the key of (MS, SEQ) into KEY (AUDIT_KEY_LEN bytes).
void audit_key_make (int64_t ms, uint32_t seq, uint8_t *key);

//  Reads KEY (KEY_LEN bytes) into *MS_P and *SEQ_P. Returns 0, or -1 when
//  it is no audit key.
int audit_key_parse (const void *key, size_t key_len, int64_t *ms_p,
                     uint32_t *seq_p);

//  KEY as an entry id (AUDIT_ID_LEN + 1 bytes into ID), and back: 0, or
//  -1 when ID is not one.
void audit_id_format (const uint8_t *key, char *id);
int audit_id_parse (const char *id, uint8_t *key);

//  Copies TEXT (NULL: "") into the field BUF of SIZE bytes, cut at a
//  UTF-8 character boundary when it does not fit.
void audit_text_set (char *buf, size_t size, const char *text);

//  Writes ENTRY as its stored record.
void audit_entry_encode (const audit_entry_t *entry, pw_t *writer);

//  Reads a stored record into ENTRY. Returns 0, or -2 when it is malformed. Unknown keys are ignored (a
//  later release may add some).
int audit_entry_decode (const pv_t *record, audit_entry_t *entry);

//  True when ENTRY passes FILTER (all but since, before and limit, which
//  go by the entry's key).
bool audit_entry_matches (const audit_entry_t *entry,
                          const audit_filter_t *filter);

//  True when OUTCOME (an error code) is a refusal: unauthorized or
//  forbidden.
bool audit_outcome_refused (const char *outcome);

//  ---------------------------------------------------------------------
//  The trail

//  A new trail (its key sequence is read from the store on first use).
audit_t *audit_new (void);

//  Frees it; NULL-safe.
void audit_destroy (audit_t **self_p);

//  Records ENTRY in TXN (the pass's) under the next key. Returns 0, or a
//  STORE_E* code (the pass's commit then fails, and the request's effect
//  goes with it).
int audit_put (audit_t *self, store_txn_t *txn, const audit_entry_t *entry);

//  A refused attempt by CALLER (a face and a name) at NOW_MS (monotonic):
//  true when it is to be recorded, with *SUPPRESSED_P the refusals left
//  out since the last recorded one; false when it is left out (counted).
bool audit_refusal_admit (audit_t *self, const char *caller, int64_t now_ms,
                          int64_t *suppressed_p);

//  Writes {entries: [ENTRY...], ?next: id} into WRITER: the entries of
//  TXN that pass FILTER, newest first, at most its limit; next (the id
//  to ask before) when more may be older, also when AUDIT_SCAN_MAX
//  entries were read without filling the page. ENTRY is the record plus
//  id and time (RFC 3339). Returns 0, or -1 when the store cannot be read.
int audit_list (store_txn_t *txn, const audit_filter_t *filter, pw_t *writer);

//  Deletes the entries older than CUTOFF_MS (wall ms), at most LIMIT.
//  Returns how many, or < 0 (a STORE_E* code).
int audit_prune (store_txn_t *txn, int64_t cutoff_ms, size_t limit);

#endif
