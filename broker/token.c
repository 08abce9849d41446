/*  =========================================================================
    token - bearer tokens for the HTTP face (see token.h)
    =========================================================================
*/
#include <czmq.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <sys/random.h>

#include "../proto/log.h"
#include "../proto/names.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "token.h"

#define S_HASH_LEN 32

//  One token.
typedef struct {
    char *name;                  //  Its name (unique)
    auth_role_t role;            //  What it may do
    uint8_t hash [S_HASH_LEN];   //  SHA-256 of the token text
    char hash_hex [2 * S_HASH_LEN + 1];  //  The same in hex (table key)
    int64_t created_ms;          //  Wall clock of its token.add
    int64_t last_used_ms;        //  Wall clock of its last use, or 0
} s_token_t;

struct _token_store_t {
    zhashx_t *by_name;           //  Name -> s_token_t (owned)
    zhashx_t *by_hash;           //  Hash in hex -> s_token_t (borrowed)
};

static void
s_token_destroy (void **item_p)
{
    s_token_t *token = (s_token_t *) *item_p;
    if (token) {
        free (token->name);
        free (token);
    }
    *item_p = NULL;
}

int
token_hash (const char *text, size_t len, uint8_t *hash)
{
    return gnutls_hash_fast (GNUTLS_DIG_SHA256, text, len, hash) == 0 ? 0 : -1;
}

static void
s_hex (const uint8_t *bytes, size_t len, char *out)
{
    static const char digits [] = "0123456789abcdef";
    for (size_t index = 0; index < len; index++) {
        out [2 * index] = digits [bytes [index] >> 4];
        out [2 * index + 1] = digits [bytes [index] & 15];
    }
    out [2 * len] = 0;
}

static void
s_add (token_store_t *self, s_token_t *token)
{
    s_hex (token->hash, S_HASH_LEN, token->hash_hex);
    zhashx_insert (self->by_name, token->name, token);
    zhashx_insert (self->by_hash, token->hash_hex, token);
}

//  The record {role, hash, created} of TOKEN.
static void
s_encode (const s_token_t *token, pw_t *writer)
{
    pw_map (writer, 3);
    pw_str (writer, "role");
    pw_str (writer, auth_role_name (token->role));
    pw_str (writer, "hash");
    pw_bin (writer, token->hash, S_HASH_LEN);
    pw_str (writer, "created");
    pw_int (writer, token->created_ms);
}

//  Reads every token of STORE into fresh tables of SELF. Returns 0 or -1.
static int
s_load (token_store_t *self, store_t *store, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (store, false);
    if (!txn) {
        snprintf (err, err_len, "cannot read the tokens: %s",
                  store_last_error (store));
        return -1;
    }
    zhashx_t *by_name = zhashx_new ();
    zhashx_set_destructor (by_name, s_token_destroy);
    zhashx_t *by_hash = zhashx_new ();
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_TOKENS);
    const void *k, *v;
    size_t k_len, v_len, broken = 0;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v,
                                         &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        pv_doc_t *doc = NULL;
        char *name = zsys_sprintf ("%.*s", (int) k_len, (const char *) k);
        const pv_t *root = NULL;
        if (name && name_valid (name)
            && pv_doc_decode (v, v_len, &doc, NULL, 0) == 0)
            root = pv_doc_root (doc);
        char *role = root ? pv_strdup (pv_map_get (root, "role")) : NULL;
        size_t hash_len = 0;
        const char *hash = root ? pv_str (pv_map_get (root, "hash"), &hash_len)
                                : NULL;
        int64_t created = 0;
        if (role && auth_role_parse (role) != AUTH_ROLE_NONE && hash
            && hash_len == S_HASH_LEN
            && pv_get_int (pv_map_get (root, "created"), &created) == 0) {
            s_token_t *token = (s_token_t *) zmalloc (sizeof (s_token_t));
            token->name = strdup (name);
            token->role = auth_role_parse (role);
            memcpy (token->hash, hash, S_HASH_LEN);
            token->created_ms = created;
            s_hex (token->hash, S_HASH_LEN, token->hash_hex);
            //  Keep the last use seen in this run
            s_token_t *old = self->by_name
                                 ? (s_token_t *) zhashx_lookup (self->by_name,
                                                                name)
                                 : NULL;
            if (old && memcmp (old->hash, token->hash, S_HASH_LEN) == 0)
                token->last_used_ms = old->last_used_ms;
            zhashx_insert (by_name, token->name, token);
            zhashx_insert (by_hash, token->hash_hex, token);
        }
        else
            broken++;
        free (role);
        zstr_free (&name);
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    store_abort (&txn);
    if (rc != STORE_ENOTFOUND) {
        snprintf (err, err_len, "cannot read the tokens: %s",
                  store_strerror (rc));
        zhashx_destroy (&by_hash);
        zhashx_destroy (&by_name);
        return -1;
    }
    if (broken)
        log_warn ("the token store holds %zu unreadable record%s (ignored)",
                  broken, broken == 1 ? "" : "s");
    zhashx_destroy (&self->by_hash);
    zhashx_destroy (&self->by_name);
    self->by_name = by_name;
    self->by_hash = by_hash;
    return 0;
}

token_store_t *
token_store_new (store_t *store, char *err, size_t err_len)
{
    token_store_t *self = (token_store_t *) zmalloc (sizeof (token_store_t));
    if (s_load (self, store, err, err_len) != 0) {
        token_store_destroy (&self);
        return NULL;
    }
    return self;
}

void
token_store_destroy (token_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    token_store_t *self = *self_p;
    zhashx_destroy (&self->by_hash);
    zhashx_destroy (&self->by_name);
    free (self);
    *self_p = NULL;
}

int
token_store_reload (token_store_t *self, store_t *store)
{
    char err [256];
    if (s_load (self, store, err, sizeof err) != 0) {
        log_error ("store: %s", err);
        return -1;
    }
    return 0;
}

bool
token_check (token_store_t *self, const char *token, int64_t wall_ms,
             auth_role_t *role_p, const char **name_p)
{
    if (!token)
        return false;
    size_t len = strlen (token);
    if (len != TOKEN_TEXT_LEN || strncmp (token, TOKEN_PREFIX, 5) != 0)
        return false;
    uint8_t hash [S_HASH_LEN];
    char hex [2 * S_HASH_LEN + 1];
    if (token_hash (token, len, hash) != 0)
        return false;
    s_hex (hash, S_HASH_LEN, hex);
    s_token_t *found = (s_token_t *) zhashx_lookup (self->by_hash, hex);
    if (!found)
        return false;
    found->last_used_ms = wall_ms;
    *role_p = found->role;
    *name_p = found->name;
    return true;
}

size_t
token_count (const token_store_t *self)
{
    return zhashx_size (self->by_name);
}

//  ---------------------------------------------------------------------
//  Changes

static int
s_refuse (const char **code_p, const char *code, char *why, size_t why_len,
          const char *format, ...) __attribute__ ((format (printf, 5, 6)));

static int
s_refuse (const char **code_p, const char *code, char *why, size_t why_len,
          const char *format, ...)
{
    *code_p = code;
    va_list args;
    va_start (args, format);
    vsnprintf (why, why_len, format, args);
    va_end (args);
    return -1;
}

int
token_add (token_store_t *self, store_txn_t *txn, const char *name,
           auth_role_t role, int64_t wall_ms, char *text,
           const char **code_p, char *why, size_t why_len)
{
    uint8_t random [32];
    int rc = -1;
    if (zhashx_lookup (self->by_name, name))
        s_refuse (code_p, PROTO_ERR_CONFLICT, why, why_len,
                  "a token named '%s' exists: revoke it first, or choose "
                  "another name", name);
    else
    if (zhashx_size (self->by_name) >= TOKEN_MAX)
        s_refuse (code_p, PROTO_ERR_CONFLICT, why, why_len,
                  "the broker holds %d tokens, its most: revoke some first",
                  TOKEN_MAX);
    else
    if (getrandom (random, sizeof random, 0) != (ssize_t) sizeof random)
        s_refuse (code_p, PROTO_ERR_INTERNAL, why, why_len,
                  "no random bytes for a token: %s", strerror (errno));
    else
    if (!txn)
        s_refuse (code_p, PROTO_ERR_STORE, why, why_len,
                  "the store cannot be written");
    else {
        memcpy (text, TOKEN_PREFIX, 5);
        s_hex (random, sizeof random, text + 5);
        s_token_t *token = (s_token_t *) zmalloc (sizeof (s_token_t));
        token->name = strdup (name);
        token->role = role;
        token->created_ms = wall_ms;
        rc = token_hash (text, TOKEN_TEXT_LEN, token->hash);
        if (rc == 0) {
            pw_t *writer = pw_new ();
            s_encode (token, writer);
            rc = store_put (txn, STORE_DB_TOKENS, name, strlen (name),
                            pw_data (writer), pw_size (writer));
            pw_destroy (&writer);
        }
        if (rc != 0) {
            s_refuse (code_p, PROTO_ERR_STORE, why, why_len,
                      "the token cannot be stored: %s", store_strerror (rc));
            explicit_bzero (text, TOKEN_TEXT_LEN + 1);
            free (token->name);
            free (token);
            rc = -1;
        }
        else {
            s_add (self, token);
            log_info ("token '%s' (%s) added", name, auth_role_name (role));
        }
    }
    explicit_bzero (random, sizeof random);
    return rc;
}

int
token_revoke (token_store_t *self, store_txn_t *txn, const char *name,
              const char **code_p, char *why, size_t why_len)
{
    s_token_t *token = name ? (s_token_t *) zhashx_lookup (self->by_name, name)
                            : NULL;
    if (!token)
        return s_refuse (code_p, PROTO_ERR_NOT_FOUND, why, why_len,
                         "no token '%s'", name ? name : "");
    if (!txn)
        return s_refuse (code_p, PROTO_ERR_STORE, why, why_len,
                         "the store cannot be written");
    int rc = store_del (txn, STORE_DB_TOKENS, name, strlen (name));
    if (rc != 0 && rc != STORE_ENOTFOUND)
        return s_refuse (code_p, PROTO_ERR_STORE, why, why_len,
                         "the token cannot be removed: %s",
                         store_strerror (rc));
    zhashx_delete (self->by_hash, token->hash_hex);
    zhashx_delete (self->by_name, name);
    log_info ("token '%s' revoked", name);
    return 0;
}

static int
s_compare_infos (const void *a, const void *b)
{
    return strcmp (((const token_info_t *) a)->name,
                   ((const token_info_t *) b)->name);
}

token_info_t *
token_list (token_store_t *self, size_t *count_p)
{
    size_t count = zhashx_size (self->by_name);
    token_info_t *infos = (token_info_t *) calloc (count + 1,
                                                   sizeof (token_info_t));
    assert (infos);
    size_t index = 0;
    for (s_token_t *token = (s_token_t *) zhashx_first (self->by_name); token;
         token = (s_token_t *) zhashx_next (self->by_name)) {
        infos [index].name = token->name;
        infos [index].role = token->role;
        infos [index].created_ms = token->created_ms;
        infos [index].last_used_ms = token->last_used_ms;
        index++;
    }
    qsort (infos, count, sizeof (token_info_t), s_compare_infos);
    *count_p = count;
    return infos;
}
