/*  =========================================================================
    token - bearer tokens for the HTTP face: each a name and a role, kept
    in the store only as a SHA-256 hash

    A token is "grid_" and 64 hex digits of 32 bytes from getrandom(2); it
    is shown once, in the token.add reply, and never stored: the store
    (STORE_DB_TOKENS) keeps name -> {role, hash, created}, and memory a
    table hash -> token for the check of each HTTP request. Roles are the
    client key roles (role.h). last_used is kept in memory only (since the
    broker started), so a read never writes the store.

    token.add, token.list and token.revoke are admin requests
    (req/tokens.c); token_add and token_revoke write into the transaction
    they are given (the pass's), and the tables follow only what was
    committed: after a failed commit the server calls token_store_reload.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_TOKEN_H
#define GRID_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../store/store.h"
#include "role.h"

#define TOKEN_PREFIX "grid_"
#define TOKEN_TEXT_LEN (5 + 64)      //  "grid_" and 64 hex digits
#define TOKEN_MAX 1000               //  Tokens at most

typedef struct _token_store_t token_store_t;

//  One token as token.list shows it (never its text, which is not kept).
typedef struct {
    const char *name;            //  Its name
    auth_role_t role;            //  What it may do
    int64_t created_ms;          //  Wall clock of its token.add
    int64_t last_used_ms;        //  Wall clock of its last use in this
                                 //  broker's run, or 0
} token_info_t;

//  Reads the tokens of STORE into a new table. Returns NULL with a
//  sentence in ERR when the store cannot be read.
token_store_t *token_store_new (store_t *store, char *err, size_t err_len);

//  Frees the table; NULL-safe, nulls *self_p.
void token_store_destroy (token_store_t **self_p);

//  Reads the table again from STORE (after a failed commit). Returns 0 or
//  -1 (the table is unchanged).
int token_store_reload (token_store_t *self, store_t *store);

//  Checks TOKEN (the text an HTTP client sent, NUL-terminated) at WALL_MS:
//  true with its role and name (*NAME_P borrowed until the next change)
//  when it is a live token; false otherwise.
bool token_check (token_store_t *self, const char *token, int64_t wall_ms,
                  auth_role_t *role_p, const char **name_p);

//  How many tokens there are.
size_t token_count (const token_store_t *self);

//  Adds a token named NAME (a valid name) with ROLE (not AUTH_ROLE_NONE),
//  created at WALL_MS, its record written into TXN. Returns 0 with the
//  token's text in TEXT (TOKEN_TEXT_LEN + 1 bytes; shown once, then
//  wiped by the caller), or -1 with a PROTO_ERR_ code in *CODE_P and a
//  sentence in WHY: conflict (the name is taken, or TOKEN_MAX tokens
//  exist), internal (no random bytes), storage_error (TXN is NULL or the
//  write failed).
int token_add (token_store_t *self, store_txn_t *txn, const char *name,
               auth_role_t role, int64_t wall_ms, char *text,
               const char **code_p, char *why, size_t why_len);

//  Revokes the token named NAME, deleting its record in TXN. Returns 0,
//  or -1 with a PROTO_ERR_ code in *CODE_P and a sentence in WHY:
//  not_found, or storage_error (TXN is NULL or the delete failed).
int token_revoke (token_store_t *self, store_txn_t *txn, const char *name,
                  const char **code_p, char *why, size_t why_len);

//  Every token, sorted by name, as a new array of *COUNT_P items (the
//  caller frees the array; the names are borrowed until the next change).
token_info_t *token_list (token_store_t *self, size_t *count_p);

//  Writes the SHA-256 hash of TEXT (LEN bytes) into HASH (32 bytes).
//  Returns 0, or -1 when the hash cannot be computed.
int token_hash (const char *text, size_t len, uint8_t *hash);

#endif
