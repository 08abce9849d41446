/*  =========================================================================
    names - names, targets, topics, durations, ids and timestamps

    Everything here is pure text handling with no I/O and no global state,
    so the broker, the agent and gridcli check names and targets the same
    way at every boundary.
    =========================================================================
*/
#include "names.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LABEL_MAX_SEGMENTS 8
#define DURATION_MAX_MS (30LL * 24 * 3600 * 1000)
#define JOB_ID_MAX_MS 0xffffffffffffLL   //  12 hex digits
#define JOB_ID_MAX_SEQ 0xffffu           //  4 hex digits
#define JOB_ID_CHARS 19                  //  "j-" + 12 + "-" + 4
#define SHOW_MAX 48                      //  User text quoted in errors

static const char *s_name_rule =
    "use letters, digits, '_' and '-' (1 to 64)";
static const char *s_target_forms =
    "all, group:G, node:ID[,ID...], label:KEY=V1.V2, fact:KEY=VALUE, "
    "any[:TARGET]";

//  Writes a sentence into ERR when there is room for one.
static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  NUL-terminated TEXT quoted for an error, in SHOW (NAME_SHOW_LEN bytes).
static const char *
s_show (const char *text, char *show)
{
    return name_show (text, strlen (text), show, NAME_SHOW_LEN);
}

static bool
s_streq (const char *a, const char *b)
{
    return strcmp (a, b) == 0;
}

//  Classes of bytes, for the checks of names and job ids below
#define S_NAME_CHAR 1           //  [A-Za-z0-9_-]
#define S_HEX_CHAR 2            //  [0-9a-f]
#define S_RANGE(from, to, class_) [from ... to] = class_
static const unsigned char s_char_class [256] = {
    S_RANGE ('0', '9', S_NAME_CHAR | S_HEX_CHAR),
    S_RANGE ('a', 'f', S_NAME_CHAR | S_HEX_CHAR),
    S_RANGE ('g', 'z', S_NAME_CHAR),
    S_RANGE ('A', 'Z', S_NAME_CHAR),
    ['_'] = S_NAME_CHAR,
    ['-'] = S_NAME_CHAR,
};

static bool
s_name_char (char c)
{
    return s_char_class [(unsigned char) c] & S_NAME_CHAR;
}

//  True when the LEN bytes at TEXT form a valid name segment.
static bool
s_name_valid_n (const char *text, size_t len)
{
    if (len == 0 || len > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!s_name_char (text [i]))
            return false;
    return true;
}

bool
name_valid (const char *text)
{
    if (!text)
        return false;
    return s_name_valid_n (text, strnlen (text, NAME_MAX_LEN + 1));
}

bool
name_label_value_valid (const char *text)
{
    if (!text)
        return false;
    size_t segments = 0;
    const char *start = text;
    while (true) {
        const char *dot = strchr (start, '.');
        size_t len = dot ? (size_t) (dot - start) : strlen (start);
        if (!s_name_valid_n (start, len) || ++segments > LABEL_MAX_SEGMENTS)
            return false;
        if (!dot)
            return true;
        start = dot + 1;
    }
}

//  ---------------------------------------------------------------------
//  Targets

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  Splits a node list into TARGET->nodes, checking each id, the count and
//  duplicates.
static int
s_parse_nodes (const char *value, target_t *target, char *err,
               size_t err_len)
{
    char show [NAME_SHOW_LEN];
    size_t count = 1;
    for (const char *p = value; *p; p++)
        if (*p == ',')
            count++;
    if (count > TARGET_MAX_NODES) {
        s_err (err, err_len, "too many node ids (%zu, at most %d)", count,
               TARGET_MAX_NODES);
        return -1;
    }
    target->nodes = calloc (count, sizeof (char *));
    if (!target->nodes) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    const char *start = value;
    for (size_t i = 0; i < count; i++) {
        const char *comma = strchr (start, ',');
        size_t len = comma ? (size_t) (comma - start) : strlen (start);
        char *id = strndup (start, len);
        if (!id) {
            s_err (err, err_len, "out of memory");
            return -1;
        }
        target->nodes [target->node_count++] = id;
        if (!s_name_valid_n (id, len)) {
            s_err (err, err_len, "node id '%s' is not valid: %s",
                   s_show (id, show), s_name_rule);
            return -1;
        }
        start = comma ? comma + 1 : start + len;
    }
    //  Duplicates are found on a sorted copy so the list keeps its order
    char **sorted = malloc (count * sizeof (char *));
    if (!sorted) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    memcpy (sorted, target->nodes, count * sizeof (char *));
    qsort (sorted, count, sizeof (char *), s_compare_strings);
    int rc = 0;
    for (size_t i = 1; i < count; i++)
        if (s_streq (sorted [i - 1], sorted [i])) {
            s_err (err, err_len, "node id '%s' is listed twice",
                   s_show (sorted [i], show));
            rc = -1;
            break;
        }
    free (sorted);
    return rc;
}

//  Bytes that may start or continue an operator
static bool
s_op_char (char c)
{
    return c == '=' || c == '!' || c == '<' || c == '>' || c == '~';
}

//  Splits TEXT, "KEY OP VALUE" ("os=debian", "mem_mb>=4096"), into the
//  key (*KEY_LEN_P bytes at TEXT) and TEST (whose value points into
//  TEXT). Returns 0, or -1 with a sentence in ERR.
static int
s_fact_parse (const char *text, size_t *key_len_p, fact_test_t *test,
              char *err, size_t err_len)
{
    static const char *usage = "fact:KEY=VALUE, with = != >= <= > < or ~= "
                               "(a glob)";
    char show [NAME_SHOW_LEN];
    memset (test, 0, sizeof *test);
    size_t key_len = 0;
    while (text [key_len] && !s_op_char (text [key_len]))
        key_len++;
    if (key_len == 0) {
        s_err (err, err_len, "a fact target needs a key (%s)", usage);
        return -1;
    }
    char key [NAME_MAX_LEN + 1];
    if (key_len > NAME_MAX_LEN) {
        s_err (err, err_len, "fact key '%s' is not valid: use letters, "
               "digits, '_' and '-' (1 to 64)",
               name_show (text, key_len, show, sizeof show));
        return -1;
    }
    memcpy (key, text, key_len);
    key [key_len] = 0;
    if (!name_valid (key)) {
        s_err (err, err_len, "fact key '%s' is not valid: use letters, "
               "digits, '_' and '-' (1 to 64)",
               name_show (key, key_len, show, sizeof show));
        return -1;
    }
    const char *op = text + key_len;
    size_t op_len = 0;
    while (s_op_char (op [op_len]))
        op_len++;
    static const struct {
        const char *text;
        fact_op_t op;
    } ops [] = {{"=", FACT_OP_EQ},  {"!=", FACT_OP_NE}, {">=", FACT_OP_GE},
                {"<=", FACT_OP_LE}, {">", FACT_OP_GT},  {"<", FACT_OP_LT},
                {"~=", FACT_OP_GLOB}};
    bool known = false;
    for (size_t index = 0; index < sizeof ops / sizeof ops [0]; index++)
        if (strlen (ops [index].text) == op_len
            && memcmp (ops [index].text, op, op_len) == 0) {
            test->op = ops [index].op;
            known = true;
        }
    if (op_len == 0) {
        s_err (err, err_len, "fact target '%s' needs an operator (%s)",
               name_show (text, strlen (text), show, sizeof show), usage);
        return -1;
    }
    if (!known) {
        s_err (err, err_len, "unknown fact operator '%s' (= != >= <= > < "
               "~=)", name_show (op, op_len, show, sizeof show));
        return -1;
    }
    const char *value = op + op_len;
    size_t value_len = strlen (value);
    if (value_len == 0) {
        s_err (err, err_len, "fact target '%s' needs a value after '%s' "
               "(%s)", key, fact_op_text (test->op), usage);
        return -1;
    }
    if (value_len > FACT_MAX_VALUE_LEN) {
        s_err (err, err_len, "fact value is too long (%zu bytes, at most "
               "%d)", value_len, FACT_MAX_VALUE_LEN);
        return -1;
    }
    if (!fact_value_valid (value)) {
        s_err (err, err_len, "fact value '%s' is not valid: no control "
               "bytes", name_show (value, value_len, show, sizeof show));
        return -1;
    }
    test->value = value;
    test->numeric = fact_number (value, &test->number);
    *key_len_p = key_len;
    return 0;
}

//  Checks VALUE for SCOPE and fills TARGET. On failure TARGET may hold
//  partial allocations; the caller clears it.
static int
s_target_build (target_scope_t scope, const char *value, bool any,
                target_t *target, char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    target->scope = scope;
    target->any = any;
    if (scope == TARGET_ALL) {
        if (value && *value) {
            s_err (err, err_len, "target 'all' takes no value (got '%s')",
                   s_show (value, show));
            return -1;
        }
        return 0;
    }
    if (!value || !*value) {
        s_err (err, err_len, "a %s target needs a value (%s)",
               target_scope_name (scope),
               scope == TARGET_GROUP  ? "group:G"
               : scope == TARGET_NODE ? "node:ID[,ID...]"
               : scope == TARGET_FACT ? "fact:KEY=VALUE"
                                      : "label:KEY=V1.V2");
        return -1;
    }
    target->value = strdup (value);
    if (!target->value) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    if (scope == TARGET_GROUP) {
        if (!name_valid (value)) {
            s_err (err, err_len, "group name '%s' is not valid: %s",
                   s_show (value, show), s_name_rule);
            return -1;
        }
        return 0;
    }
    if (scope == TARGET_NODE)
        return s_parse_nodes (value, target, err, err_len);
    if (scope == TARGET_FACT) {
        size_t key_len = 0;
        if (s_fact_parse (target->value, &key_len, &target->fact, err,
                             err_len) != 0)
            return -1;
        target->fact_key = strndup (target->value, key_len);
        if (!target->fact_key) {
            s_err (err, err_len, "out of memory");
            return -1;
        }
        return 0;
    }

    //  TARGET_LABEL
    const char *equals = strchr (value, '=');
    if (!equals) {
        s_err (err, err_len,
               "label target '%s' needs KEY=VALUE (label:tier=web.dev)",
               s_show (value, show));
        return -1;
    }
    target->label_key = strndup (value, (size_t) (equals - value));
    target->label_value = strdup (equals + 1);
    if (!target->label_key || !target->label_value) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    if (!name_valid (target->label_key)) {
        s_err (err, err_len, "label key '%s' is not valid: %s",
               s_show (target->label_key, show), s_name_rule);
        return -1;
    }
    if (!name_label_value_valid (target->label_value)) {
        s_err (err, err_len,
               "label value '%s' is not valid: use 1 to %d names joined by "
               "'.', each of letters, digits, '_' and '-' (1 to 64)",
               s_show (target->label_value, show), LABEL_MAX_SEGMENTS);
        return -1;
    }
    return 0;
}

//  Maps a scope word to its enum; -1 when unknown.
static int
s_scope_lookup (const char *word, size_t len, target_scope_t *scope)
{
    static const struct {
        const char *name;
        target_scope_t scope;
    } scopes [] = {{"all", TARGET_ALL},
                   {"group", TARGET_GROUP},
                   {"node", TARGET_NODE},
                   {"label", TARGET_LABEL},
                   {"fact", TARGET_FACT}};
    for (size_t i = 0; i < sizeof (scopes) / sizeof (scopes [0]); i++)
        if (strlen (scopes [i].name) == len
            && memcmp (scopes [i].name, word, len) == 0) {
            *scope = scopes [i].scope;
            return 0;
        }
    return -1;
}

//  ---------------------------------------------------------------------
//  Target expressions: a recursive-descent parser over tokens '(' ')'
//  and words; "and", "or" and "not" are the operator words, any other
//  word is a term (a plain target). The tree keeps and/or n-ary, so its
//  depth is bounded by TARGET_EXPR_MAX_DEPTH whatever the length.

typedef enum { S_EXPR_TERM, S_EXPR_NOT, S_EXPR_AND, S_EXPR_OR } s_expr_op_t;

struct target_expr_s {
    s_expr_op_t op;             //  What this node is
    target_t term;              //  S_EXPR_TERM: the plain target
    target_expr_t **kids;       //  NOT: one; AND/OR: two or more (owned)
    size_t kid_count;           //  How many kids
};

typedef enum { S_TOK_END, S_TOK_OPEN, S_TOK_CLOSE, S_TOK_WORD } s_tok_kind_t;

typedef struct {
    const char *text;           //  The expression (without "any:")
    size_t base;                //  Columns before TEXT ("any:" is 4)
    size_t pos;                 //  Next byte to lex
    s_tok_kind_t kind;          //  Current token
    size_t start;               //  Its offset in TEXT
    size_t len;                 //  Its length
    const char *prev;           //  The token before it, for messages
    size_t prev_len;            //  Its length
    int depth;                  //  Nesting so far
    size_t terms;               //  Terms so far
    char *err;                  //  Where the sentence goes
    size_t err_len;             //  Its size
} s_lexer_t;

static bool
s_expr_space (char c)
{
    return c == ' ' || c == '\t';
}

//  True when TEXT holds the syntax of an expression rather than one term.
static bool
s_is_expression (const char *text)
{
    return strpbrk (text, " \t()") != NULL || s_streq (text, "not")
        || s_streq (text, "and") || s_streq (text, "or");
}

static void
s_lex (s_lexer_t *lex)
{
    if (lex->kind != S_TOK_END || lex->start != 0 || lex->len != 0) {
        lex->prev = lex->text + lex->start;
        lex->prev_len = lex->len;
    }
    while (s_expr_space (lex->text [lex->pos]))
        lex->pos++;
    lex->start = lex->pos;
    char c = lex->text [lex->pos];
    if (c == '\0') {
        lex->kind = S_TOK_END;
        lex->len = 0;
        return;
    }
    if (c == '(' || c == ')') {
        lex->kind = c == '(' ? S_TOK_OPEN : S_TOK_CLOSE;
        lex->len = 1;
        lex->pos++;
        return;
    }
    while (lex->text [lex->pos] && !s_expr_space (lex->text [lex->pos])
           && lex->text [lex->pos] != '(' && lex->text [lex->pos] != ')')
        lex->pos++;
    lex->kind = S_TOK_WORD;
    lex->len = lex->pos - lex->start;
}

static bool
s_tok_is (const s_lexer_t *lex, const char *word)
{
    return lex->kind == S_TOK_WORD && lex->len == strlen (word)
        && memcmp (lex->text + lex->start, word, lex->len) == 0;
}

static bool
s_tok_is_operator (const s_lexer_t *lex)
{
    return s_tok_is (lex, "and") || s_tok_is (lex, "or")
        || s_tok_is (lex, "not");
}

//  Writes "bad target at column N: " and the rest into the lexer's ERR;
//  the column is that of the current token.
static void
s_expr_err (s_lexer_t *lex, const char *format, ...)
{
    if (!lex->err || lex->err_len == 0)
        return;
    int n = snprintf (lex->err, lex->err_len, "bad target at column %zu: ",
                      lex->base + lex->start + 1);
    if (n < 0 || (size_t) n >= lex->err_len)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (lex->err + n, lex->err_len - (size_t) n, format, args);
    va_end (args);
}

//  The current token quoted for a message ("'group:web'", "the end").
static const char *
s_tok_show (const s_lexer_t *lex, char *show)
{
    if (lex->kind == S_TOK_END)
        return strcpy (show, "the end");
    char inner [NAME_SHOW_LEN];
    name_show (lex->text + lex->start, lex->len, inner, sizeof inner);
    snprintf (show, NAME_SHOW_LEN + 2, "'%s'", inner);
    return show;
}

static void
s_expr_free (target_expr_t **expr_p)
{
    target_expr_t *expr = *expr_p;
    if (!expr)
        return;
    target_clear (&expr->term);
    for (size_t i = 0; i < expr->kid_count; i++)
        s_expr_free (&expr->kids [i]);
    free (expr->kids);
    free (expr);
    *expr_p = NULL;
}

//  A node OP over KIDS (taken). Kids of the same op are flattened in, so
//  "a and (b and c)" is one and of three. NULL when out of memory.
static target_expr_t *
s_expr_node (s_expr_op_t op, target_expr_t **kids, size_t count)
{
    size_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += kids [i]->op == op && op != S_EXPR_NOT ? kids [i]->kid_count
                                                        : 1;
    target_expr_t *expr = calloc (1, sizeof (*expr));
    target_expr_t **all = calloc (total, sizeof (*all));
    if (!expr || !all) {
        free (expr);
        free (all);
        for (size_t i = 0; i < count; i++)
            s_expr_free (&kids [i]);
        return NULL;
    }
    expr->op = op;
    for (size_t i = 0; i < count; i++) {
        if (kids [i]->op == op && op != S_EXPR_NOT) {
            for (size_t k = 0; k < kids [i]->kid_count; k++)
                all [expr->kid_count++] = kids [i]->kids [k];
            kids [i]->kid_count = 0;
            s_expr_free (&kids [i]);
        }
        else
            all [expr->kid_count++] = kids [i];
    }
    expr->kids = all;
    return expr;
}

static target_expr_t *s_parse_or (s_lexer_t *lex);

//  term | "not" unary | "(" or ")"
static target_expr_t *
s_parse_unary (s_lexer_t *lex)
{
    char show [NAME_SHOW_LEN + 2], prev [NAME_SHOW_LEN];
    if (lex->kind == S_TOK_OPEN || s_tok_is (lex, "not")) {
        if (++lex->depth > TARGET_EXPR_MAX_DEPTH) {
            s_expr_err (lex, "nested too deep (at most %d parentheses and "
                             "nots)", TARGET_EXPR_MAX_DEPTH);
            return NULL;
        }
        bool open = lex->kind == S_TOK_OPEN;
        size_t open_at = lex->start;
        s_lex (lex);
        target_expr_t *kid = open ? s_parse_or (lex) : s_parse_unary (lex);
        lex->depth--;
        if (!kid)
            return NULL;
        if (open) {
            if (lex->kind != S_TOK_CLOSE) {
                s_expr_err (lex, "expected ')' to close the '(' at column "
                                 "%zu, got %s",
                            lex->base + open_at + 1, s_tok_show (lex, show));
                s_expr_free (&kid);
                return NULL;
            }
            s_lex (lex);
            return kid;
        }
        target_expr_t *expr = s_expr_node (S_EXPR_NOT, &kid, 1);
        if (!expr)
            s_expr_err (lex, "out of memory");
        return expr;
    }
    if (lex->kind != S_TOK_WORD || s_tok_is_operator (lex)) {
        if (lex->prev)
            s_expr_err (lex, "expected a term after '%s', got %s",
                        name_show (lex->prev, lex->prev_len, prev,
                                   sizeof prev),
                        s_tok_show (lex, show));
        else
            s_expr_err (lex, "expected a term, got %s",
                        s_tok_show (lex, show));
        return NULL;
    }
    if (++lex->terms > TARGET_EXPR_MAX_TERMS) {
        s_expr_err (lex, "too many terms (at most %d)", TARGET_EXPR_MAX_TERMS);
        return NULL;
    }
    if ((lex->len == 3 || (lex->len > 3 && lex->text [lex->start + 3] == ':'))
        && memcmp (lex->text + lex->start, "any", 3) == 0) {
        s_expr_err (lex, "'any' applies to the whole target: write "
                         "any:EXPRESSION");
        return NULL;
    }
    target_expr_t *expr = calloc (1, sizeof (*expr));
    char *word = strndup (lex->text + lex->start, lex->len);
    char why [256];
    if (!expr || !word) {
        free (expr);
        free (word);
        s_expr_err (lex, "out of memory");
        return NULL;
    }
    expr->op = S_EXPR_TERM;
    int rc = target_parse (word, &expr->term, why, sizeof why);
    free (word);
    if (rc != 0) {
        s_expr_err (lex, "%s", why);
        free (expr);
        return NULL;
    }
    s_lex (lex);
    return expr;
}

//  unary {"and" unary}   or   and {"or" and}
static target_expr_t *
s_parse_chain (s_lexer_t *lex, const char *word, s_expr_op_t op,
               target_expr_t *(*parse_kid) (s_lexer_t *))
{
    target_expr_t *kids [TARGET_EXPR_MAX_TERMS + 1];
    size_t count = 0;
    kids [count] = parse_kid (lex);
    if (!kids [count])
        return NULL;
    count++;
    while (s_tok_is (lex, word)) {
        s_lex (lex);
        //  Each kid holds a term, so TARGET_EXPR_MAX_TERMS bounds COUNT
        target_expr_t *kid = parse_kid (lex);
        if (!kid) {
            while (count > 0)
                s_expr_free (&kids [--count]);
            return NULL;
        }
        kids [count++] = kid;
    }
    if (count == 1)
        return kids [0];
    target_expr_t *expr = s_expr_node (op, kids, count);
    if (!expr)
        s_expr_err (lex, "out of memory");
    return expr;
}

static target_expr_t *
s_parse_and (s_lexer_t *lex)
{
    return s_parse_chain (lex, "and", S_EXPR_AND, s_parse_unary);
}

static target_expr_t *
s_parse_or (s_lexer_t *lex)
{
    return s_parse_chain (lex, "or", S_EXPR_OR, s_parse_and);
}

//  Writes EXPR in canonical form; PARENT is the op of the node around it.
static void
s_expr_write (const target_expr_t *expr, s_expr_op_t parent, FILE *out)
{
    if (expr->op == S_EXPR_TERM) {
        char *text = target_format (&expr->term);
        fputs (text ? text : "?", out);
        free (text);
        return;
    }
    if (expr->op == S_EXPR_NOT) {
        fputs ("not ", out);
        s_expr_write (expr->kids [0], S_EXPR_NOT, out);
        return;
    }
    //  and binds tighter than or; not tighter than both
    bool parens = parent == S_EXPR_NOT
               || (parent == S_EXPR_AND && expr->op == S_EXPR_OR);
    if (parens)
        fputc ('(', out);
    for (size_t i = 0; i < expr->kid_count; i++) {
        if (i > 0)
            fputs (expr->op == S_EXPR_AND ? " and " : " or ", out);
        s_expr_write (expr->kids [i], expr->op, out);
    }
    if (parens)
        fputc (')', out);
}

static bool
s_expr_matches (const target_expr_t *expr, const target_subject_t *subject)
{
    switch (expr->op) {
    case S_EXPR_TERM:
        return target_matches_subject (&expr->term, subject);
    case S_EXPR_NOT:
        return !s_expr_matches (expr->kids [0], subject);
    case S_EXPR_AND:
    case S_EXPR_OR:
        for (size_t i = 0; i < expr->kid_count; i++) {
            bool hit = s_expr_matches (expr->kids [i], subject);
            if (hit != (expr->op == S_EXPR_AND))
                return hit;
        }
        return expr->op == S_EXPR_AND;
    }
    return false;
}

//  Parses TEXT (BASE columns into what the user wrote) as an expression
//  into TARGET. A single term becomes that term's plain target.
static int
s_expr_parse (const char *text, size_t base, bool any, target_t *target,
              char *err, size_t err_len)
{
    size_t len = strlen (text);
    if (len > TARGET_EXPR_MAX_LEN) {
        s_err (err, err_len,
               "target expression is too long (%zu bytes, at most %d)", len,
               TARGET_EXPR_MAX_LEN);
        return -1;
    }
    s_lexer_t lex = {.text = text, .base = base, .err = err,
                     .err_len = err_len};
    s_lex (&lex);
    lex.prev = NULL;
    target_expr_t *expr = s_parse_or (&lex);
    if (!expr)
        return -1;
    if (lex.kind != S_TOK_END) {
        char show [NAME_SHOW_LEN + 2], prev [NAME_SHOW_LEN];
        if (lex.kind == S_TOK_CLOSE)
            s_expr_err (&lex, "')' without a matching '('");
        else
            s_expr_err (&lex, "expected 'and', 'or' or the end after '%s', "
                              "got %s",
                        name_show (lex.prev, lex.prev_len, prev, sizeof prev),
                        s_tok_show (&lex, show));
        s_expr_free (&expr);
        return -1;
    }
    if (expr->op == S_EXPR_TERM) {
        *target = expr->term;
        memset (&expr->term, 0, sizeof (expr->term));
        s_expr_free (&expr);
        target->any = any;
        return 0;
    }
    char *canonical = NULL;
    size_t canonical_len = 0;
    FILE *out = open_memstream (&canonical, &canonical_len);
    if (!out) {
        s_expr_free (&expr);
        s_err (err, err_len, "out of memory");
        return -1;
    }
    s_expr_write (expr, S_EXPR_OR, out);
    if (fclose (out) != 0) {
        free (canonical);
        s_expr_free (&expr);
        s_err (err, err_len, "out of memory");
        return -1;
    }
    target->scope = TARGET_EXPR;
    target->any = any;
    target->expr = expr;
    target->value = canonical;
    return 0;
}

int
target_parse (const char *text, target_t *target, char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    memset (target, 0, sizeof (*target));
    if (!text || !*text) {
        s_err (err, err_len, "target is empty (%s)", s_target_forms);
        return -1;
    }
    bool any = false;
    if (s_streq (text, "any"))
        text = "all", any = true;
    else
    if (strncmp (text, "any:", 4) == 0) {
        text += 4, any = true;
        if (strncmp (text, "any", 3) == 0
            && (text [3] == '\0' || text [3] == ':')) {
            s_err (err, err_len, "'any' cannot be nested (%s)",
                   s_target_forms);
            return -1;
        }
        if (!*text) {
            s_err (err, err_len, "'any:' needs a target (%s)",
                   s_target_forms);
            return -1;
        }
    }
    if (s_is_expression (text))
        return s_expr_parse (text, any ? 4 : 0, any, target, err, err_len);
    const char *colon = strchr (text, ':');
    size_t word_len = colon ? (size_t) (colon - text) : strlen (text);
    target_scope_t scope;
    if (s_scope_lookup (text, word_len, &scope) != 0) {
        char *word = strndup (text, word_len);
        s_err (err, err_len, "unknown target scope '%s' (%s)",
               word ? s_show (word, show) : "?", s_target_forms);
        free (word);
        return -1;
    }
    if (scope == TARGET_ALL && colon) {
        s_err (err, err_len, "target 'all' takes no value (got '%s')",
               s_show (colon + 1, show));
        return -1;
    }
    if (scope != TARGET_ALL && !colon) {
        s_err (err, err_len, "target '%s' needs a value (%s)",
               target_scope_name (scope), s_target_forms);
        return -1;
    }
    int rc = s_target_build (scope, colon ? colon + 1 : NULL, any, target,
                             err, err_len);
    if (rc != 0)
        target_clear (target);
    return rc;
}

int
target_from_parts (const char *scope, const char *value, bool any,
                   target_t *target, char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    memset (target, 0, sizeof (*target));
    target_scope_t kind;
    if (!scope) {
        s_err (err, err_len, "target scope is missing (all, group, node, "
                             "label, fact, expr)");
        return -1;
    }
    if (s_streq (scope, "expr")) {
        if (!value || !*value) {
            s_err (err, err_len, "an expr target needs a value (group:web "
                                 "and not node:web-03)");
            return -1;
        }
        int rc = s_expr_parse (value, 0, any, target, err, err_len);
        if (rc != 0)
            target_clear (target);
        return rc;
    }
    if (s_scope_lookup (scope, strlen (scope), &kind) != 0) {
        s_err (err, err_len,
               "unknown target scope '%s' (all, group, node, label, fact, expr)",
               s_show (scope, show));
        return -1;
    }
    int rc = s_target_build (kind, value, any, target, err, err_len);
    if (rc != 0)
        target_clear (target);
    return rc;
}

void
target_clear (target_t *target)
{
    if (!target)
        return;
    free (target->value);
    free (target->label_key);
    free (target->label_value);
    free (target->fact_key);
    for (size_t i = 0; i < target->node_count; i++)
        free (target->nodes [i]);
    free (target->nodes);
    s_expr_free (&target->expr);
    memset (target, 0, sizeof (*target));
}

int
target_copy (target_t *dest, const target_t *src)
{
    memset (dest, 0, sizeof (*dest));
    if (src->scope == TARGET_EXPR)
        //  The canonical text parses back to the same tree
        return target_from_parts ("expr", src->value, src->any, dest, NULL,
                                  0);
    if (src->scope == TARGET_FACT)
        //  The test points into the value: parse it again
        return target_from_parts ("fact", src->value, src->any, dest, NULL,
                                  0);
    dest->scope = src->scope;
    dest->any = src->any;
    if ((src->value && !(dest->value = strdup (src->value)))
        || (src->label_key && !(dest->label_key = strdup (src->label_key)))
        || (src->label_value
            && !(dest->label_value = strdup (src->label_value))))
        goto fail;
    if (src->node_count > 0) {
        dest->nodes = calloc (src->node_count, sizeof (char *));
        if (!dest->nodes)
            goto fail;
        for (size_t i = 0; i < src->node_count; i++) {
            dest->nodes [i] = strdup (src->nodes [i]);
            if (!dest->nodes [i])
                goto fail;
            dest->node_count++;
        }
    }
    return 0;
fail:
    target_clear (dest);
    return -1;
}

//  Appends the ids of EXPR's node terms to *IDS_P (*COUNT of *ROOM).
static void
s_expr_named_nodes (const target_expr_t *expr, const char ***ids_p,
                    size_t *count, size_t *room)
{
    if (expr->op != S_EXPR_TERM) {
        for (size_t i = 0; i < expr->kid_count; i++)
            s_expr_named_nodes (expr->kids [i], ids_p, count, room);
        return;
    }
    if (expr->term.scope != TARGET_NODE)
        return;
    if (*count + expr->term.node_count > *room) {
        *room = *count + expr->term.node_count + *room;
        *ids_p = (const char **) realloc (*ids_p, *room * sizeof (char *));
        assert (*ids_p);
    }
    for (size_t i = 0; i < expr->term.node_count; i++)
        (*ids_p) [(*count)++] = expr->term.nodes [i];
}

size_t
target_named_nodes (const target_t *target, const char ***ids_p)
{
    *ids_p = NULL;
    size_t count = 0, room = 0;
    if (target->scope == TARGET_EXPR && target->expr)
        s_expr_named_nodes (target->expr, ids_p, &count, &room);
    else
    if (target->scope == TARGET_NODE && target->node_count > 0) {
        *ids_p = (const char **) calloc (target->node_count, sizeof (char *));
        assert (*ids_p);
        for (size_t i = 0; i < target->node_count; i++)
            (*ids_p) [count++] = target->nodes [i];
    }
    return count;
}

const char *
target_scope_name (target_scope_t scope)
{
    switch (scope) {
    case TARGET_ALL:
        return "all";
    case TARGET_GROUP:
        return "group";
    case TARGET_NODE:
        return "node";
    case TARGET_LABEL:
        return "label";
    case TARGET_FACT:
        return "fact";
    case TARGET_EXPR:
        return "expr";
    }
    return "?";
}

char *
target_format (const target_t *target)
{
    char *text = NULL;
    const char *prefix = target->any ? "any:" : "";
    int rc;
    if (target->scope == TARGET_ALL)
        rc = asprintf (&text, "%sall", prefix);
    else
    if (target->scope == TARGET_EXPR)
        rc = asprintf (&text, "%s%s", prefix, target->value);
    else
        rc = asprintf (&text, "%s%s:%s", prefix,
                       target_scope_name (target->scope),
                       target->value ? target->value : "");
    return rc < 0 ? NULL : text;
}

char *
target_topic (const target_t *target)
{
    char *topic = NULL;
    int rc;
    switch (target->scope) {
    case TARGET_ALL:
        return strdup ("all/");
    case TARGET_GROUP:
        rc = asprintf (&topic, "group/%s/", target->value);
        break;
    case TARGET_LABEL:
        rc = asprintf (&topic, "label/%s/%s/", target->label_key,
                       target->label_value);
        break;
    default:
        return NULL;
    }
    return rc < 0 ? NULL : topic;
}

char *
topic_for_node (const char *node_id)
{
    char *topic = NULL;
    return asprintf (&topic, "node/%s/", node_id) < 0 ? NULL : topic;
}

bool
target_matches (const target_t *target, const char *node_id,
                char *const *groups, size_t group_count,
                char *const *label_keys, char *const *label_values,
                size_t label_count)
{
    target_subject_t subject = {.node_id = node_id, .groups = groups,
                                .group_count = group_count,
                                .label_keys = label_keys,
                                .label_values = label_values,
                                .label_count = label_count};
    return target_matches_subject (target, &subject);
}

bool
target_matches_subject (const target_t *target,
                        const target_subject_t *subject)
{
    const char *node_id = subject->node_id;
    char *const *groups = subject->groups;
    size_t group_count = subject->group_count;
    char *const *label_keys = subject->label_keys;
    char *const *label_values = subject->label_values;
    size_t label_count = subject->label_count;
    switch (target->scope) {
    case TARGET_ALL:
        return true;
    case TARGET_GROUP:
        for (size_t i = 0; i < group_count; i++)
            if (groups [i] && s_streq (groups [i], target->value))
                return true;
        return false;
    case TARGET_NODE:
        for (size_t i = 0; i < target->node_count; i++)
            if (node_id && s_streq (target->nodes [i], node_id))
                return true;
        return false;
    case TARGET_LABEL: {
        //  web.dev.us-east is inside web and web.dev, but not inside "we"
        //  (a segment must match whole) nor web.prod
        size_t want = strlen (target->label_value);
        for (size_t i = 0; i < label_count; i++) {
            const char *have = label_values [i];
            if (!label_keys [i] || !have
                || !s_streq (label_keys [i], target->label_key))
                continue;
            if (strncmp (have, target->label_value, want) == 0
                && (have [want] == '\0' || have [want] == '.'))
                return true;
        }
        return false;
    }
    case TARGET_FACT:
        return subject->fact
            && fact_test_matches (&target->fact,
                                  subject->fact (subject->fact_arg,
                                                 target->fact_key));
    case TARGET_EXPR:
        return target->expr && s_expr_matches (target->expr, subject);
    }
    return false;
}

static void
s_expr_each_fact (const target_expr_t *expr,
                  void (*fn) (const target_t *term, void *arg), void *arg)
{
    if (expr->op != S_EXPR_TERM) {
        for (size_t i = 0; i < expr->kid_count; i++)
            s_expr_each_fact (expr->kids [i], fn, arg);
        return;
    }
    if (expr->term.scope == TARGET_FACT)
        fn (&expr->term, arg);
}

target_expr_op_t
target_expr_op (const target_expr_t *expr)
{
    switch (expr->op) {
    case S_EXPR_NOT:
        return TARGET_EXPR_NOT;
    case S_EXPR_AND:
        return TARGET_EXPR_AND;
    case S_EXPR_OR:
        return TARGET_EXPR_OR;
    case S_EXPR_TERM:
        break;
    }
    return TARGET_EXPR_TERM;
}

size_t
target_expr_kid_count (const target_expr_t *expr)
{
    return expr->op == S_EXPR_TERM ? 0 : expr->kid_count;
}

const target_expr_t *
target_expr_kid (const target_expr_t *expr, size_t index)
{
    assert (expr->op != S_EXPR_TERM && index < expr->kid_count);
    return expr->kids [index];
}

const target_t *
target_expr_term (const target_expr_t *expr)
{
    return expr->op == S_EXPR_TERM ? &expr->term : NULL;
}

void
target_each_fact (const target_t *target,
                  void (*fn) (const target_t *term, void *arg), void *arg)
{
    if (target->scope == TARGET_FACT)
        fn (target, arg);
    else
    if (target->scope == TARGET_EXPR && target->expr)
        s_expr_each_fact (target->expr, fn, arg);
}

//  ---------------------------------------------------------------------
//  Durations

int
duration_parse (const char *text, int64_t *ms_p)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units [] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000},
                  {"s", 1000}, {"ms", 1}};
    if (!text || !*text)
        return -1;
    int64_t total = 0;
    //  Units must come largest first, each at most once ("1h30m", not
    //  "30m1h" or "1h1h"), so every duration has one spelling
    size_t next_unit = 0;
    const char *p = text;
    while (*p) {
        if (*p < '0' || *p > '9')
            return -1;
        int64_t count = 0;
        while (*p >= '0' && *p <= '9') {
            count = count * 10 + (*p++ - '0');
            if (count > DURATION_MAX_MS)
                return -1;
        }
        size_t unit = 0;
        size_t unit_len = 0;
        if (p [0] == 'm' && p [1] == 's')
            unit = 4, unit_len = 2;
        else {
            for (unit = 0; unit < 4; unit++)
                if (*p == units [unit].unit [0])
                    break;
            if (unit == 4)
                return -1;
            unit_len = 1;
        }
        if (unit < next_unit)
            return -1;
        next_unit = unit + 1;
        p += unit_len;
        total += count * units [unit].ms;
        if (total > DURATION_MAX_MS)
            return -1;
    }
    *ms_p = total;
    return 0;
}

void
duration_format (int64_t ms, char *buf, size_t buf_len)
{
    if (!buf || buf_len == 0)
        return;
    if (ms < 0)
        ms = 0;
    if (ms == 0) {
        snprintf (buf, buf_len, "0s");
        return;
    }
    if (ms % 1000 != 0) {
        snprintf (buf, buf_len, "%lldms", (long long) ms);
        return;
    }
    int64_t secs = ms / 1000;
    const struct {
        int64_t secs;
        char unit;
    } parts [] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
    size_t used = 0;
    buf [0] = '\0';
    for (size_t i = 0; i < 4; i++) {
        int64_t count = secs / parts [i].secs;
        secs %= parts [i].secs;
        if (count == 0 || used >= buf_len)
            continue;
        int rc = snprintf (buf + used, buf_len - used, "%lld%c",
                           (long long) count, parts [i].unit);
        if (rc < 0)
            return;
        used += (size_t) rc;
    }
}

//  ---------------------------------------------------------------------
//  Ids and time

void
job_id_make (int64_t wall_ms, int64_t *last_ms, uint32_t *seq, char *buf,
             size_t buf_len)
{
    if (wall_ms < 0)
        wall_ms = 0;
    if (wall_ms > JOB_ID_MAX_MS)
        wall_ms = JOB_ID_MAX_MS;
    //  Never go back: a clock that steps backwards, or more than 65536 ids
    //  in one millisecond, borrow the next millisecond instead, so ids stay
    //  unique and in submission order
    if (wall_ms > *last_ms) {
        *last_ms = wall_ms;
        *seq = 0;
    }
    else
    if (*seq >= JOB_ID_MAX_SEQ) {
        *last_ms += 1;
        *seq = 0;
    }
    else
        *seq += 1;
    snprintf (buf, buf_len, "j-%012llx-%04x", (unsigned long long) *last_ms,
              (unsigned) *seq);
}

bool
job_id_valid (const char *text)
{
    if (!text || strlen (text) != JOB_ID_CHARS || text [0] != 'j'
        || text [1] != '-' || text [14] != '-')
        return false;
    for (size_t i = 2; i < JOB_ID_CHARS; i++)
        if (i != 14
        &&  !(s_char_class [(unsigned char) text [i]] & S_HEX_CHAR))
            return false;
    return true;
}

size_t
id_hash (const void *key)
{
    const unsigned char *text = (const unsigned char *) key;
    size_t len = strlen ((const char *) text);
    const unsigned char *end = text + len;
    uint64_t hash = UINT64_C (0x9e3779b97f4a7c15) ^ len;
    uint64_t word;
    for (; end - text > 8; text += 8) {
        memcpy (&word, text, 8);
        hash = (hash ^ word) * UINT64_C (0xff51afd7ed558ccd);
        hash ^= hash >> 32;
    }
    //  The last one to eight bytes, read as whole words that may overlap
    //  the bytes before them
    uint64_t tail = 0;
    if (len >= 8)
        memcpy (&tail, end - 8, 8);
    else
    if (len >= 4) {
        uint32_t first, last;
        memcpy (&first, text, 4);
        memcpy (&last, end - 4, 4);
        tail = ((uint64_t) first << 32) | last;
    }
    else
        for (; text < end; text++)
            tail = (tail << 8) | *text;
    //  Every bit of the input moves the low bits too (tables that mask
    //  them): MurmurHash3's finaliser
    hash ^= tail;
    hash ^= hash >> 33;
    hash *= UINT64_C (0xff51afd7ed558ccd);
    hash ^= hash >> 33;
    hash *= UINT64_C (0xc4ceb9fe1a85ec53);
    hash ^= hash >> 33;
    return (size_t) hash;
}

void
time_format (int64_t wall_ms, char *buf, size_t buf_len)
{
    if (!buf || buf_len == 0)
        return;
    int64_t secs = wall_ms / 1000;
    int64_t millis = wall_ms % 1000;
    if (millis < 0) {
        millis += 1000;
        secs -= 1;
    }
    time_t when = (time_t) secs;
    struct tm tm;
    if (!gmtime_r (&when, &tm)) {
        snprintf (buf, buf_len, "1970-01-01T00:00:00.000Z");
        return;
    }
    snprintf (buf, buf_len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
              tm.tm_min, tm.tm_sec, (int) millis);
}

const char *
name_show (const char *text, size_t len, char *buf, size_t buf_len)
{
    if (!buf || buf_len == 0)
        return buf;
    if (!text)
        len = 0;
    //  Room for the cut text, "..." and the NUL
    size_t room = buf_len > 4 ? buf_len - 4 : 0;
    if (room > SHOW_MAX)
        room = SHOW_MAX;
    size_t take = len;
    if (take > room) {
        take = room;
        while (take > 0 && ((unsigned char) text [take] & 0xc0) == 0x80)
            take--;
    }
    for (size_t i = 0; i < take; i++) {
        unsigned char c = (unsigned char) text [i];
        buf [i] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
    }
    if (take < len) {
        memcpy (buf + take, "...", 3);
        take += 3;
    }
    buf [take] = '\0';
    return buf;
}

char *
hex_encode (const uint8_t *bytes, size_t size, char *hex)
{
    static const char digits [] = "0123456789abcdef";
    for (size_t index = 0; index < size; index++) {
        hex [2 * index] = digits [bytes [index] >> 4];
        hex [2 * index + 1] = digits [bytes [index] & 15];
    }
    hex [2 * size] = 0;
    return hex;
}

int
hex_decode (const char *hex, uint8_t *bytes, size_t size)
{
    if (!hex || strlen (hex) != 2 * size)
        return -1;
    for (size_t index = 0; index < 2 * size; index++) {
        char c = hex [index];
        int digit = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (digit < 0)
            return -1;
        if (index % 2 == 0)
            bytes [index / 2] = (uint8_t) (digit << 4);
        else
            bytes [index / 2] |= (uint8_t) digit;
    }
    return 0;
}

void
stamp_key_make (int64_t ms, uint32_t seq, uint8_t *key)
{
    uint64_t stamp = (uint64_t) ms;
    for (int index = 0; index < 8; index++)
        key [index] = (uint8_t) (stamp >> (56 - 8 * index));
    for (int index = 0; index < 4; index++)
        key [8 + index] = (uint8_t) (seq >> (24 - 8 * index));
}

int
stamp_key_parse (const void *key, size_t key_len, int64_t *ms_p,
                 uint32_t *seq_p)
{
    if (!key || key_len != STAMP_KEY_LEN)
        return -1;
    const uint8_t *bytes = (const uint8_t *) key;
    uint64_t stamp = 0;
    uint32_t seq = 0;
    for (int index = 0; index < 8; index++)
        stamp = stamp << 8 | bytes [index];
    for (int index = 8; index < 12; index++)
        seq = seq << 8 | bytes [index];
    if (stamp > INT64_MAX)
        return -1;
    *ms_p = (int64_t) stamp;
    *seq_p = seq;
    return 0;
}
